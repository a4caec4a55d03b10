//! `fermyon:spin/llm@2.0.0`: Spin's inferencing interface, which Spin's
//! SDKs for interpreted languages (Python's `spin-sdk`) import whether or
//! not the app uses it.
//!
//! Edge runs no models at its points of presence (no GPU, and a model per
//! tenant would not fit the pool's memory budget), so every call answers
//! `model-not-supported`, the variant Spin gives for a model it has no
//! engine for. An app that asks gets a Spin error it already handles; an
//! app that never asks loads and runs.
#![deny(missing_docs)]

use wasmtime::component::{HasData, Linker};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:spin-llm;
            world host {
                import fermyon:spin/llm@2.0.0;
            }
        ",
        path: ["../../wit/spin/fermyon-spin@2.0.0"],
    });
}

use generated::fermyon::spin::llm;

/// The host side: no state, no models.
pub struct NoModels;

impl llm::Host for NoModels {
    fn infer(
        &mut self,
        _model: String,
        _prompt: String,
        _params: Option<llm::InferencingParams>,
    ) -> Result<llm::InferencingResult, llm::Error> {
        Err(llm::Error::ModelNotSupported)
    }

    fn generate_embeddings(
        &mut self,
        _model: String,
        _text: Vec<String>,
    ) -> Result<llm::EmbeddingsResult, llm::Error> {
        Err(llm::Error::ModelNotSupported)
    }
}

struct HasNoModels;

impl HasData for HasNoModels {
    type Data<'a> = NoModels;
}

/// Adds `fermyon:spin/llm@2.0.0` to a linker.
pub fn add_to_linker<T: 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    llm::add_to_linker::<T, HasNoModels>(linker, |_| NoModels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_is_not_supported() {
        let mut host = NoModels;
        assert!(matches!(
            llm::Host::infer(&mut host, "llama2-chat".into(), "hi".into(), None),
            Err(llm::Error::ModelNotSupported)
        ));
        assert!(matches!(
            llm::Host::generate_embeddings(&mut host, "all-minilm-l6-v2".into(), vec![]),
            Err(llm::Error::ModelNotSupported)
        ));
    }

    #[test]
    fn links_in_an_engine_without_concurrency() {
        let mut config = wasmtime::Config::new();
        config.concurrency_support(false);
        let engine = wasmtime::Engine::new(&config).unwrap();
        let mut linker = Linker::<()>::new(&engine);
        add_to_linker(&mut linker).unwrap();
    }
}
