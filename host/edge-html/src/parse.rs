//! The rewriting thread: lol_html parses the page; where a guest handler
//! must run, the thread sends what the handler may read and waits for its
//! changes. lol_html calls handlers in the middle of `write`, and a guest
//! cannot be called from a host call, so the parse lives on its own thread
//! and stops there; the host call that asked for the next event returns it.

use lol_html::html_content::{
    Comment, ContentType, Doctype, DocumentEnd, Element, EndTag, TextChunk,
};
use lol_html::{
    DocumentContentHandlers, ElementContentHandlers, HandlerResult, HtmlRewriter, MemorySettings,
    Selector, Settings,
};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc::Receiver;
/// The thread's answers: sent without blocking, awaited by the guest's
/// `next` (which must not block its serving thread).
type Sender<T> = tokio::sync::mpsc::UnboundedSender<T>;

/// Most bytes the rewriter may buffer (a start tag split over chunks, say).
pub const MAX_BUFFER_BYTES: usize = 8 * 1024 * 1024;

/// Content a rewriter may hold for elements' end tags (`append`, `after`
/// wait in lol_html until the end tag passes, and a page whose end tags
/// never come would keep them to its end), each change counted with
/// [`WAITING_OVERHEAD`].
pub const MAX_WAITING_BYTES: usize = 8 * 1024 * 1024;

/// What a waiting change takes beside its content: its place in lol_html's
/// end tag queue and the handler that gives its bytes back.
const WAITING_OVERHEAD: usize = 64;

/// What the host side sends the thread.
pub enum Input {
    Chunk(Vec<u8>),
    End,
    Changes(Vec<Change>),
}

/// Content to insert.
#[derive(Debug, Clone)]
pub struct Content {
    pub value: String,
    pub html: bool,
}

impl Content {
    fn kind(&self) -> ContentType {
        if self.html {
            ContentType::Html
        } else {
            ContentType::Text
        }
    }
}

/// A handler's change (mirrors the WIT `change`).
#[derive(Debug, Clone)]
pub enum Change {
    SetAttribute(String, String),
    RemoveAttribute(String),
    SetName(String),
    SetText(String),
    Before(Content),
    After(Content),
    Prepend(Content),
    Append(Content),
    Replace(Content),
    SetInnerContent(Content),
    Remove,
    RemoveAndKeepContent,
    OnEndTag(u32),
}

/// A place the parse stopped at, or what it produced (mirrors the WIT
/// `event`).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Element {
        handler: u32,
        tag_name: String,
        attributes: Vec<(String, String)>,
        namespace_uri: String,
        self_closing: bool,
        can_have_content: bool,
        removed: bool,
    },
    EndTag {
        id: u32,
        name: String,
    },
    Text {
        handler: Option<u32>,
        text: String,
        last_in_text_node: bool,
        removed: bool,
    },
    Comment {
        handler: Option<u32>,
        text: String,
        removed: bool,
    },
    Doctype {
        name: Option<String>,
        public_id: Option<String>,
        system_id: Option<String>,
    },
    DocumentEnd,
    Output(Vec<u8>),
    NeedInput,
    Finished,
}

/// What the thread sends back: an event, or why it stopped.
pub type Output = Result<Event, String>;

/// Which handlers a selector has.
#[derive(Debug, Clone)]
pub struct SelectorHandlers {
    pub selector: Selector,
    pub element: bool,
    pub comments: bool,
    pub text: bool,
}

/// Which document handlers there are.
#[derive(Debug, Clone, Copy, Default)]
pub struct DocumentHandlers {
    pub doctype: bool,
    pub comments: bool,
    pub text: bool,
    pub end: bool,
}

/// The thread's side of the conversation.
struct Io {
    input: Receiver<Input>,
    output: Sender<Output>,
    /// Rewritten bytes not yet sent: sent before each stop (so output and
    /// stops keep their order) and when the written input is used up.
    pending: RefCell<Vec<u8>>,
    /// Bytes of changes waiting for their elements' end tags.
    waiting: Cell<usize>,
}

impl Io {
    /// The next input, once sent: the parsing after it is a step of its
    /// own (the wait before it uses no CPU, and one long chunk is long,
    /// not the rewriter's life).
    fn receive(&self) -> Result<Input, std::sync::mpsc::RecvError> {
        let input = self.input.recv();
        edge_blocking::next_step();
        input
    }

    fn flush(&self) {
        let bytes = std::mem::take(&mut *self.pending.borrow_mut());
        if !bytes.is_empty() {
            let _ = self.output.send(Ok(Event::Output(bytes)));
        }
    }

    /// Sends a stop and waits for the handler's changes.
    fn stop(&self, event: Event) -> Result<Vec<Change>, Box<dyn std::error::Error + Send + Sync>> {
        self.flush();
        self.output
            .send(Ok(event))
            .map_err(|_| "the rewriter was dropped")?;
        match self.receive() {
            Ok(Input::Changes(changes)) => Ok(changes),
            Ok(_) => Err("a handler's changes were expected (respond) before more input".into()),
            Err(_) => Err("the rewriter was dropped".into()),
        }
    }
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn unsupported(change: &Change, unit: &str) -> Failure {
    format!("{change:?} cannot be applied to {unit}").into()
}

fn apply_element(el: &mut Element<'_, '_>, changes: Vec<Change>, io: &Rc<Io>) -> HandlerResult {
    for change in changes {
        match change {
            Change::SetAttribute(name, value) => el.set_attribute(&name, &value)?,
            Change::RemoveAttribute(name) => el.remove_attribute(&name),
            Change::SetName(name) => el.set_tag_name(&name)?,
            Change::Before(c) => el.before(&c.value, c.kind()),
            Change::After(c) => {
                until_end_tag(el, c.value.len(), io)?;
                el.after(&c.value, c.kind())
            }
            Change::Prepend(c) => el.prepend(&c.value, c.kind()),
            Change::Append(c) => {
                until_end_tag(el, c.value.len(), io)?;
                el.append(&c.value, c.kind())
            }
            Change::Replace(c) => el.replace(&c.value, c.kind()),
            Change::SetInnerContent(c) => el.set_inner_content(&c.value, c.kind()),
            Change::Remove => el.remove(),
            Change::RemoveAndKeepContent => el.remove_and_keep_content(),
            Change::OnEndTag(id) => {
                let io = io.clone();
                let handlers = el
                    .end_tag_handlers()
                    .ok_or("this element has no end tag (it is void or self-closing)")?;
                handlers.push(Box::new(move |end: &mut EndTag<'_>| {
                    let changes = io.stop(Event::EndTag {
                        id,
                        name: end.name(),
                    })?;
                    apply_end_tag(end, changes)
                }));
            }
            other @ Change::SetText(_) => return Err(unsupported(&other, "an element")),
        }
    }
    Ok(())
}

/// Counts `bytes` of content as waiting for `el`'s end tag, until it
/// passes (or the element is closed without it); refused past
/// [`MAX_WAITING_BYTES`]. (An element without an end
/// tag has its content go out at once.)
fn until_end_tag(el: &mut Element<'_, '_>, bytes: usize, io: &Rc<Io>) -> HandlerResult {
    let Some(handlers) = el.end_tag_handlers() else {
        return Ok(());
    };
    let bytes = bytes + WAITING_OVERHEAD;
    let waiting = io.waiting.get() + bytes;
    if waiting > MAX_WAITING_BYTES {
        return Err(format!(
            "content waiting for its elements' end tags (append, after) would take {waiting} bytes, past the {MAX_WAITING_BYTES}-byte limit"
        )
        .into());
    }
    io.waiting.set(waiting);
    // The bytes come back when the handler is dropped: after it ran at the
    // end tag, or unrun when lol_html discards it (an element closed by
    // another's end tag, `<p>` by `</div>`, never sees its own).
    let waiting = Waiting {
        io: io.clone(),
        bytes,
    };
    handlers.push(Box::new(move |_: &mut EndTag<'_>| {
        let _waiting = &waiting;
        Ok(())
    }));
    Ok(())
}

/// Bytes counted in [`Io::waiting`] until this is dropped.
struct Waiting {
    io: Rc<Io>,
    bytes: usize,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let io = &self.io;
        io.waiting.set(io.waiting.get().saturating_sub(self.bytes));
    }
}

fn apply_end_tag(end: &mut EndTag<'_>, changes: Vec<Change>) -> HandlerResult {
    for change in changes {
        match change {
            Change::SetName(name) => end.set_name_str(name),
            Change::Before(c) => end.before(&c.value, c.kind()),
            Change::After(c) => end.after(&c.value, c.kind()),
            Change::Replace(c) => end.replace(&c.value, c.kind()),
            Change::Remove => end.remove(),
            other => return Err(unsupported(&other, "an end tag")),
        }
    }
    Ok(())
}

fn apply_text(text: &mut TextChunk<'_>, changes: Vec<Change>) -> HandlerResult {
    for change in changes {
        match change {
            Change::Before(c) => text.before(&c.value, c.kind()),
            Change::After(c) => text.after(&c.value, c.kind()),
            Change::Replace(c) => text.replace(&c.value, c.kind()),
            Change::Remove => text.remove(),
            other => return Err(unsupported(&other, "a text chunk")),
        }
    }
    Ok(())
}

fn apply_comment(comment: &mut Comment<'_>, changes: Vec<Change>) -> HandlerResult {
    for change in changes {
        match change {
            Change::SetText(t) => comment.set_text(&t)?,
            Change::Before(c) => comment.before(&c.value, c.kind()),
            Change::After(c) => comment.after(&c.value, c.kind()),
            Change::Replace(c) => comment.replace(&c.value, c.kind()),
            Change::Remove => comment.remove(),
            other => return Err(unsupported(&other, "a comment")),
        }
    }
    Ok(())
}

fn apply_document_end(end: &mut DocumentEnd<'_>, changes: Vec<Change>) -> HandlerResult {
    for change in changes {
        match change {
            Change::Append(c) => end.append(&c.value, c.kind()),
            other => return Err(unsupported(&other, "the document's end")),
        }
    }
    Ok(())
}

fn text_event(handler: Option<u32>, t: &TextChunk<'_>) -> Event {
    Event::Text {
        handler,
        text: t.as_str().to_string(),
        last_in_text_node: t.last_in_text_node(),
        removed: t.removed(),
    }
}

fn comment_event(handler: Option<u32>, c: &Comment<'_>) -> Event {
    Event::Comment {
        handler,
        text: c.text(),
        removed: c.removed(),
    }
}

fn doctype_event(d: &Doctype<'_>) -> Event {
    Event::Doctype {
        name: d.name(),
        public_id: d.public_id(),
        system_id: d.system_id(),
    }
}

/// Runs a rewriter until the page ends, the host side goes away, or the
/// parse fails (then the failure is the last output).
pub fn run(
    selectors: Vec<SelectorHandlers>,
    document: DocumentHandlers,
    input: Receiver<Input>,
    output: Sender<Output>,
) {
    let io = Rc::new(Io {
        input,
        output,
        pending: RefCell::new(Vec::new()),
        waiting: Cell::new(0),
    });
    let mut element_handlers = Vec::new();
    for (i, s) in selectors.iter().enumerate() {
        let index = i as u32;
        let mut handlers = ElementContentHandlers::default();
        if s.element {
            let io = io.clone();
            handlers = handlers.element(move |el: &mut Element<'_, '_>| {
                let event = Event::Element {
                    handler: index,
                    tag_name: el.tag_name(),
                    attributes: el
                        .attributes()
                        .iter()
                        .map(|a| (a.name(), a.value()))
                        .collect(),
                    namespace_uri: el.namespace_uri().to_string(),
                    self_closing: el.is_self_closing(),
                    can_have_content: el.can_have_content(),
                    removed: el.removed(),
                };
                let changes = io.stop(event)?;
                apply_element(el, changes, &io)
            });
        }
        if s.comments {
            let io = io.clone();
            handlers = handlers.comments(move |c: &mut Comment<'_>| {
                let changes = io.stop(comment_event(Some(index), c))?;
                apply_comment(c, changes)
            });
        }
        if s.text {
            let io = io.clone();
            handlers = handlers.text(move |t: &mut TextChunk<'_>| {
                let changes = io.stop(text_event(Some(index), t))?;
                apply_text(t, changes)
            });
        }
        element_handlers.push((Cow::Owned(s.selector.clone()), handlers));
    }
    let mut doc = DocumentContentHandlers::default();
    if document.doctype {
        let io = io.clone();
        doc = doc.doctype(move |d: &mut Doctype<'_>| {
            io.stop(doctype_event(d))?;
            Ok(())
        });
    }
    if document.comments {
        let io = io.clone();
        doc = doc.comments(move |c: &mut Comment<'_>| {
            let changes = io.stop(comment_event(None, c))?;
            apply_comment(c, changes)
        });
    }
    if document.text {
        let io = io.clone();
        doc = doc.text(move |t: &mut TextChunk<'_>| {
            let changes = io.stop(text_event(None, t))?;
            apply_text(t, changes)
        });
    }
    if document.end {
        let io = io.clone();
        doc = doc.end(move |end: &mut DocumentEnd<'_>| {
            let changes = io.stop(Event::DocumentEnd)?;
            apply_document_end(end, changes)
        });
    }
    let settings = Settings {
        element_content_handlers: element_handlers,
        document_content_handlers: vec![doc],
        memory_settings: MemorySettings {
            preallocated_parsing_buffer_size: 4096,
            max_allowed_memory_usage: MAX_BUFFER_BYTES,
        },
        ..Settings::new()
    };
    let sink = io.clone();
    let mut rewriter = HtmlRewriter::new(settings, move |bytes: &[u8]| {
        sink.pending.borrow_mut().extend_from_slice(bytes);
    });
    loop {
        let step = match io.receive() {
            Ok(Input::Chunk(bytes)) => rewriter.write(&bytes).map(|()| Event::NeedInput),
            Ok(Input::End) => {
                let result = rewriter.end().map(|()| Event::Finished);
                io.flush();
                let _ = io.output.send(result.map_err(|e| e.to_string()));
                return;
            }
            Ok(Input::Changes(_)) => {
                let _ = io
                    .output
                    .send(Err("changes came with no handler waiting for them".into()));
                return;
            }
            Err(_) => return,
        };
        io.flush();
        match step {
            Ok(event) => {
                if io.output.send(Ok(event)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = io.output.send(Err(e.to_string()));
                return;
            }
        }
    }
}
