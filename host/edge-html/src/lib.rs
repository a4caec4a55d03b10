//! `edge:html/rewriter`: streaming HTML rewriting for Workers'
//! `HTMLRewriter`, by Cloudflare's lol_html running in the host.
//!
//! Each rewriter parses on a thread of its own ([`parse`]), which stops
//! where a guest handler must run; the guest's `next` returns the stop,
//! its `respond` resumes the parse with the handler's changes. The host
//! enforces the conversation's order (write → next… → respond → next… →
//! need-input), so at most one chunk's output waits at a time, and bounds
//! what a hostile guest can hold: chunks of 64 KiB, 8 MiB of parse buffer
//! and 8 MiB of content waiting for end tags,
//! 16 rewriters per instance, 256 rewriting threads per host (each counted
//! until its thread ends, not only while the guest holds it), 256
//! selectors of at most 16 KiB in all per rewriter (lol_html tries every
//! selector on every start tag). `next` waits for the thread without
//! blocking its serving thread. The thread's CPU is its tenant's: charged
//! as it parses, and at `SCHED_IDLE` while the tenant is behind
//! (`edge_blocking::TenantWork::run_here`).

mod parse;

use parse::{Change, Content, DocumentHandlers, Event, Input, Output, SelectorHandlers};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::time::Duration;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit/html",
        world: "edge:html/imports",
        imports: {
            "edge:html/rewriter.[method]rewriter.next": async | trappable,
            default: trappable,
        },
        with: { "edge:html/rewriter.rewriter": super::Rewriter },
    });
}

use generated::edge::html::rewriter as api;

/// Largest chunk a guest may write at once.
pub const MAX_CHUNK_BYTES: usize = 65536;
/// Live rewriters one instance may hold.
pub const MAX_PER_INSTANCE: usize = 16;
/// Rewriting threads the host runs at once, over all tenants.
pub const MAX_THREADS: usize = 256;
/// Rewriting threads one tenant runs at once: a quarter of the host's, so
/// one tenant's instances cannot take them all.
pub const MAX_THREADS_PER_TENANT: usize = MAX_THREADS / 4;
/// Longest a parse step may take before the guest's call fails.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Selectors one rewriter may have, and their bytes in all.
pub const MAX_SELECTORS: usize = 256;
/// See [`MAX_SELECTORS`].
pub const MAX_SELECTOR_BYTES: usize = 16 << 10;

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// One of [`MAX_THREADS`], and of the tenant's [`MAX_THREADS_PER_TENANT`]
/// if the instance counts its tenant's: given back when its thread ends.
struct ThreadPermit {
    tenant: Option<Arc<AtomicUsize>>,
}

/// Takes one of `counter`'s places, if fewer than `max` are taken.
fn take_place(counter: &AtomicUsize, max: usize) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .is_ok()
}

impl ThreadPermit {
    /// A permit, or why none: the host's or the tenant's threads taken.
    fn take(tenant: Option<&Arc<AtomicUsize>>) -> Result<Self, String> {
        if !take_place(&THREADS, MAX_THREADS) {
            return Err("the host runs as many HTML rewriters as it may: try again later".into());
        }
        if let Some(t) = tenant
            && !take_place(t, MAX_THREADS_PER_TENANT)
        {
            THREADS.fetch_sub(1, Ordering::AcqRel);
            return Err(format!(
                "this tenant runs {MAX_THREADS_PER_TENANT} HTML rewriters already: try again later"
            ));
        }
        Ok(ThreadPermit {
            tenant: tenant.cloned(),
        })
    }
}

impl Drop for ThreadPermit {
    fn drop(&mut self) {
        THREADS.fetch_sub(1, Ordering::AcqRel);
        if let Some(t) = &self.tenant {
            t.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Where a rewriter's conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a chunk or the end.
    Idle,
    /// Input given: `next` until need-input or finished.
    Parsing,
    /// Stopped at a handler: `respond` first.
    Stopped,
    /// Finished or failed.
    Done,
}

/// A guest's rewriter: the channel to its parsing thread.
pub struct Rewriter {
    input: SyncSender<Input>,
    output: tokio::sync::mpsc::UnboundedReceiver<Output>,
    phase: Phase,
}

/// The instance's rewriters, counted, its tenant's rewriting threads, and
/// where their parsing is charged.
#[derive(Default)]
pub struct Rewriters {
    live: usize,
    tenant: Option<Arc<AtomicUsize>>,
    work: edge_blocking::TenantWork,
}

impl Rewriters {
    /// An instance of the tenant whose running threads `tenant` counts,
    /// their parsing its `work` (charged to it, in its lane).
    pub fn for_tenant(tenant: Arc<AtomicUsize>, work: edge_blocking::TenantWork) -> Self {
        Self {
            live: 0,
            tenant: Some(tenant),
            work,
        }
    }
}

/// What the linked functions see of the store data.
pub struct Html<'a> {
    pub rewriters: &'a mut Rewriters,
    pub table: &'a mut ResourceTable,
}

/// Store data that can host rewriters.
pub trait HtmlView {
    fn html(&mut self) -> Html<'_>;
}

struct HasHtml;

impl HasData for HasHtml {
    type Data<'a> = Html<'a>;
}

/// Adds `edge:html/rewriter` to a linker.
pub fn add_to_linker<T: HtmlView + Send + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    fn view<T: HtmlView>(t: &mut T) -> Html<'_> {
        t.html()
    }
    api::add_to_linker::<T, HasHtml>(linker, view::<T>)
}

fn content(c: api::Content) -> Content {
    Content {
        value: c.value,
        html: c.html,
    }
}

fn change(c: api::Change) -> Change {
    use api::Change as C;
    match c {
        C::SetAttribute((n, v)) => Change::SetAttribute(n, v),
        C::RemoveAttribute(n) => Change::RemoveAttribute(n),
        C::SetName(n) => Change::SetName(n),
        C::SetText(t) => Change::SetText(t),
        C::Before(x) => Change::Before(content(x)),
        C::After(x) => Change::After(content(x)),
        C::Prepend(x) => Change::Prepend(content(x)),
        C::Append(x) => Change::Append(content(x)),
        C::Replace(x) => Change::Replace(content(x)),
        C::SetInnerContent(x) => Change::SetInnerContent(content(x)),
        C::Remove => Change::Remove,
        C::RemoveAndKeepContent => Change::RemoveAndKeepContent,
        C::OnEndTag(id) => Change::OnEndTag(id),
    }
}

fn event(e: Event) -> api::Event {
    use api::Event as E;
    match e {
        Event::Element {
            handler,
            tag_name,
            attributes,
            namespace_uri,
            self_closing,
            can_have_content,
            removed,
        } => E::Element(api::Element {
            handler,
            tag_name,
            attributes,
            namespace_uri,
            self_closing,
            can_have_content,
            removed,
        }),
        Event::EndTag { id, name } => E::EndTag(api::EndTag { id, name }),
        Event::Text {
            handler,
            text,
            last_in_text_node,
            removed,
        } => E::Text(api::TextChunk {
            handler,
            text,
            last_in_text_node,
            removed,
        }),
        Event::Comment {
            handler,
            text,
            removed,
        } => E::Comment(api::Comment {
            handler,
            text,
            removed,
        }),
        Event::Doctype {
            name,
            public_id,
            system_id,
        } => E::Doctype(api::Doctype {
            name,
            public_id,
            system_id,
        }),
        Event::DocumentEnd => E::DocumentEnd,
        Event::Output(bytes) => E::Output(bytes),
        Event::NeedInput => E::NeedInput,
        Event::Finished => E::Finished,
    }
}

impl Html<'_> {
    fn rewriter(&mut self, r: &Resource<Rewriter>) -> wasmtime::Result<&mut Rewriter> {
        Ok(self.table.get_mut(r)?)
    }
}

fn out_of_order(phase: Phase, call: &str) -> String {
    let expected = match phase {
        Phase::Idle => "write or end",
        Phase::Parsing => "next",
        Phase::Stopped => "respond",
        Phase::Done => "nothing more: the rewriter is done",
    };
    format!("{call} out of turn: the rewriter expects {expected}")
}

impl api::HostRewriter for Html<'_> {
    fn create(
        &mut self,
        selectors: Vec<api::SelectorHandlers>,
        document: api::DocumentHandlers,
    ) -> wasmtime::Result<Result<Resource<Rewriter>, String>> {
        let bytes: usize = selectors.iter().map(|s| s.selector.len()).sum();
        if selectors.len() > MAX_SELECTORS || bytes > MAX_SELECTOR_BYTES {
            return Ok(Err(format!(
                "{} selectors of {bytes} bytes: at most {MAX_SELECTORS} selectors of {MAX_SELECTOR_BYTES} bytes in all",
                selectors.len()
            )));
        }
        let mut parsed = Vec::with_capacity(selectors.len());
        for (i, s) in selectors.iter().enumerate() {
            match lol_html::Selector::from_str(&s.selector) {
                Ok(selector) => parsed.push(SelectorHandlers {
                    selector,
                    element: s.element,
                    comments: s.comments,
                    text: s.text,
                }),
                Err(e) => {
                    return Ok(Err(format!(
                        "selector {i} ({:?}) is not valid: {e}",
                        s.selector
                    )));
                }
            }
        }
        if self.rewriters.live >= MAX_PER_INSTANCE {
            return Ok(Err(format!(
                "this instance already has {MAX_PER_INSTANCE} HTML rewriters open"
            )));
        }
        let permit = match ThreadPermit::take(self.rewriters.tenant.as_ref()) {
            Ok(p) => p,
            Err(why) => return Ok(Err(why)),
        };
        let document = DocumentHandlers {
            doctype: document.doctype,
            comments: document.comments,
            text: document.text,
            end: document.end,
        };
        let (input_tx, input_rx) = mpsc::sync_channel(1);
        let (output_tx, output_rx) = tokio::sync::mpsc::unbounded_channel();
        // The permit is the thread's: a rewriter dropped mid-chunk leaves
        // its thread parsing to the chunk's end, still counted. Its parsing
        // is the tenant's CPU, run in its lane.
        let work = self.rewriters.work.clone();
        std::thread::Builder::new()
            .name("edge-html".into())
            .stack_size(1 << 20)
            .spawn(move || {
                let _permit = permit;
                work.run_here(|| parse::run(parsed, document, input_rx, output_tx))
            })?;
        self.rewriters.live += 1;
        let r = Rewriter {
            input: input_tx,
            output: output_rx,
            phase: Phase::Idle,
        };
        Ok(Ok(self.table.push(r)?))
    }

    fn write(
        &mut self,
        r: Resource<Rewriter>,
        chunk: Vec<u8>,
    ) -> wasmtime::Result<Result<(), String>> {
        let rw = self.rewriter(&r)?;
        if rw.phase != Phase::Idle {
            return Ok(Err(out_of_order(rw.phase, "write")));
        }
        if chunk.len() > MAX_CHUNK_BYTES {
            return Ok(Err(format!(
                "a chunk of {} bytes: at most {MAX_CHUNK_BYTES} at a time",
                chunk.len()
            )));
        }
        if rw.input.send(Input::Chunk(chunk)).is_err() {
            rw.phase = Phase::Done;
            return Ok(Err("the rewriter has stopped".into()));
        }
        rw.phase = Phase::Parsing;
        Ok(Ok(()))
    }

    fn end(&mut self, r: Resource<Rewriter>) -> wasmtime::Result<Result<(), String>> {
        let rw = self.rewriter(&r)?;
        if rw.phase != Phase::Idle {
            return Ok(Err(out_of_order(rw.phase, "end")));
        }
        if rw.input.send(Input::End).is_err() {
            rw.phase = Phase::Done;
            return Ok(Err("the rewriter has stopped".into()));
        }
        rw.phase = Phase::Parsing;
        Ok(Ok(()))
    }

    async fn next(
        &mut self,
        r: Resource<Rewriter>,
    ) -> wasmtime::Result<Result<api::Event, String>> {
        let rw = self.rewriter(&r)?;
        if rw.phase != Phase::Parsing {
            return Ok(Err(out_of_order(rw.phase, "next")));
        }
        // Awaited, not blocked on: the serving thread goes on with its
        // other connections while this one's page parses.
        let got = match tokio::time::timeout(STEP_TIMEOUT, rw.output.recv()).await {
            Ok(Some(Ok(e))) => e,
            Ok(Some(Err(reason))) => {
                rw.phase = Phase::Done;
                return Ok(Err(reason));
            }
            Err(_) => {
                rw.phase = Phase::Done;
                return Ok(Err(format!(
                    "the rewriter took longer than {} s on one step",
                    STEP_TIMEOUT.as_secs()
                )));
            }
            Ok(None) => {
                rw.phase = Phase::Done;
                return Ok(Err("the rewriter has stopped".into()));
            }
        };
        rw.phase = match got {
            Event::Output(_) => Phase::Parsing,
            Event::NeedInput => Phase::Idle,
            Event::Finished => Phase::Done,
            _ => Phase::Stopped,
        };
        Ok(Ok(event(got)))
    }

    fn respond(
        &mut self,
        r: Resource<Rewriter>,
        changes: Vec<api::Change>,
    ) -> wasmtime::Result<Result<(), String>> {
        let rw = self.rewriter(&r)?;
        if rw.phase != Phase::Stopped {
            return Ok(Err(out_of_order(rw.phase, "respond")));
        }
        let changes = changes.into_iter().map(change).collect();
        if rw.input.send(Input::Changes(changes)).is_err() {
            rw.phase = Phase::Done;
            return Ok(Err("the rewriter has stopped".into()));
        }
        rw.phase = Phase::Parsing;
        Ok(Ok(()))
    }

    fn drop(&mut self, r: Resource<Rewriter>) -> wasmtime::Result<()> {
        // Dropping the channels ends the thread where it waits.
        self.table.delete(r)?;
        self.rewriters.live = self.rewriters.live.saturating_sub(1);
        Ok(())
    }
}

impl api::Host for Html<'_> {}

#[cfg(test)]
mod tests;
