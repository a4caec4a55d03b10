//! Spin's variables interfaces over the same [`Variables`]:
//! `fermyon:spin/variables@2.0.0` (Spin's SDKs up to 5.x),
//! `spin:variables/variables@3.0.0` (an async function, SDK 6 and 7) and
//! `wasi:config/store@0.2.0-draft-2024-09-27` (SDK 7).
//!
//! Errors are Spin's: a name that is not a valid variable name is
//! `invalid-name`, a valid one the component was not given is `undefined`,
//! each with Spin's words; `wasi:config` answers `none` for both.

use crate::{Variables, VariablesView};
use wasmtime::component::{Accessor, HasData, Linker};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:spin-variables;
            world host {
                import fermyon:spin/variables@2.0.0;
                import spin:variables/variables@3.0.0;
                import wasi:config/store@0.2.0-draft-2024-09-27;
            }
        ",
        path: [
            "../../wit/spin/fermyon-spin@2.0.0",
            "../../wit/spin/spin-variables@3.0.0",
            "../../wit/spin/wasi-runtime-config-2024-09-27",
        ],
    });
}

use generated::fermyon::spin::variables as v2;
use generated::spin::variables::variables as v3;
use generated::wasi::config::store as config;

/// Why a variable could not be had, in Spin's terms.
enum Lookup {
    InvalidName(String),
    Undefined(String),
}

impl Variables {
    /// A variable as Spin's `get` answers it.
    fn spin_get(&self, name: &str) -> Result<String, Lookup> {
        if let Err(reason) = check_name(name) {
            return Err(Lookup::InvalidName(format!("{name:?}: {reason}")));
        }
        self.get(name).map(str::to_string).ok_or_else(|| {
            Lookup::Undefined(format!("no variable for {:?}.{name:?}", self.component()))
        })
    }
}

/// Spin's rule for variable names: lower-case ASCII letters, digits and
/// single underscores, starting with a letter and ending with a letter or
/// digit (they map to environment variables and file names).
pub fn check_name(name: &str) -> Result<(), String> {
    let Some(first) = name.bytes().next() else {
        return Err("must not be empty".into());
    };
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'))
    {
        return Err(format!(
            "invalid character {bad:?}. Variable names may contain only lower-case letters, numbers, and underscores."
        ));
    }
    if !first.is_ascii_lowercase() {
        return Err("must start with a lowercase ASCII letter".into());
    }
    if !name
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric())
    {
        return Err("must end with a lowercase ASCII letter or digit".into());
    }
    if name.contains("__") {
        return Err("must not contain multiple consecutive underscores".into());
    }
    Ok(())
}

/// What the linked functions see: the component's variables.
pub struct SpinVariables<'a>(&'a Variables);

struct HasVariables;

impl HasData for HasVariables {
    type Data<'a> = SpinVariables<'a>;
}

impl v2::Host for SpinVariables<'_> {
    fn get(&mut self, name: String) -> Result<String, v2::Error> {
        self.0.spin_get(&name).map_err(|e| match e {
            Lookup::InvalidName(m) => v2::Error::InvalidName(m),
            Lookup::Undefined(m) => v2::Error::Undefined(m),
        })
    }
}

impl v3::Host for SpinVariables<'_> {}

impl<T: VariablesView> v3::HostWithStore<T> for HasVariables {
    async fn get(store: &Accessor<T, Self>, name: String) -> Result<String, v3::Error> {
        store.with(|mut view| {
            view.get().0.spin_get(&name).map_err(|e| match e {
                Lookup::InvalidName(m) => v3::Error::InvalidName(m),
                Lookup::Undefined(m) => v3::Error::Undefined(m),
            })
        })
    }
}

impl config::Host for SpinVariables<'_> {
    fn get(&mut self, key: String) -> Result<Option<String>, config::Error> {
        // As Spin: an invalid name is not an error here, just absent.
        Ok(self.0.spin_get(&key).ok())
    }

    fn get_all(&mut self) -> Result<Vec<(String, String)>, config::Error> {
        Ok(self
            .0
            .all()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }
}

/// Adds Spin's variables interfaces (both generations) and its
/// `wasi:config/store` draft to a linker.
///
/// `concurrent`: whether the linker's engine has Wasmtime's concurrency
/// support; the versions with async functions are linked only then.
pub fn add_to_linker<T: VariablesView + Send + 'static>(
    linker: &mut Linker<T>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    fn view<T: VariablesView>(t: &mut T) -> SpinVariables<'_> {
        SpinVariables(t.variables())
    }
    v2::add_to_linker::<T, HasVariables>(linker, view::<T>)?;
    if concurrent {
        v3::add_to_linker::<T, HasVariables>(linker, view::<T>)?;
    }
    config::add_to_linker::<T, HasVariables>(linker, view::<T>)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_spins_rule() {
        assert!(check_name("api_key2").is_ok());
        for (bad, why) in [
            ("", "empty"),
            ("Api", "invalid character 'A'"),
            ("2fa", "start with"),
            ("key_", "end with"),
            ("a__b", "consecutive"),
            ("a-b", "invalid character '-'"),
        ] {
            let err = check_name(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn undefined_and_invalid_names_are_told_apart() {
        let mut values = std::collections::BTreeMap::new();
        values.insert("greeting".to_string(), "hi".to_string());
        let vars = Variables::from_map(&values).for_component("hello");
        assert_eq!(vars.spin_get("greeting").ok().as_deref(), Some("hi"));
        match vars.spin_get("missing") {
            Err(Lookup::Undefined(m)) => assert_eq!(m, "no variable for \"hello\".\"missing\""),
            _ => panic!("expected undefined"),
        }
        assert!(matches!(vars.spin_get("Bad"), Err(Lookup::InvalidName(_))));
    }
}
