use super::parse::{self, Change, Content, DocumentHandlers, Event, Input, SelectorHandlers};
use std::str::FromStr;
use std::sync::mpsc;

fn on(selector: &str, element: bool, comments: bool, text: bool) -> SelectorHandlers {
    SelectorHandlers {
        selector: lol_html::Selector::from_str(selector).unwrap(),
        element,
        comments,
        text,
    }
}

fn html(value: &str) -> Content {
    Content {
        value: value.into(),
        html: true,
    }
}

/// Runs the page through a rewriter whose handlers answer with
/// `handle(event)`; returns the output and every stop, in order.
fn rewrite(
    selectors: Vec<SelectorHandlers>,
    document: DocumentHandlers,
    chunks: &[&str],
    mut handle: impl FnMut(&Event) -> Vec<Change>,
) -> (String, Vec<Event>) {
    let (input_tx, input_rx) = mpsc::sync_channel(1);
    let (output_tx, mut output_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || parse::run(selectors, document, input_rx, output_tx));
    let mut out = Vec::new();
    let mut stops = Vec::new();
    let mut inputs: Vec<Input> = chunks
        .iter()
        .map(|c| Input::Chunk(c.as_bytes().to_vec()))
        .collect();
    inputs.push(Input::End);
    for input in inputs {
        input_tx.send(input).unwrap();
        loop {
            match output_rx.blocking_recv().unwrap().unwrap() {
                Event::Output(bytes) => out.extend(bytes),
                Event::NeedInput | Event::Finished => break,
                stop => {
                    let changes = handle(&stop);
                    stops.push(stop);
                    input_tx.send(Input::Changes(changes)).unwrap();
                }
            }
        }
    }
    (String::from_utf8(out).unwrap(), stops)
}

#[test]
fn elements_end_tags_text_and_the_document_end_change_as_the_handlers_say() {
    let page = [
        "<!DOCTYPE html><html><body><a hr",
        "ef=\"/x\">link</a><!-- note --><p>old te",
        "xt</p></body></html>",
    ];
    let (out, stops) = rewrite(
        vec![
            on("a[href]", true, false, false),
            on("p", false, false, true),
            on("body", false, true, false),
        ],
        DocumentHandlers {
            doctype: true,
            end: true,
            ..Default::default()
        },
        &page,
        |e| match e {
            Event::Element { tag_name, .. } if tag_name == "a" => vec![
                Change::SetAttribute("href".into(), "https://example.com/x".into()),
                Change::OnEndTag(7),
            ],
            Event::EndTag { id: 7, .. } => vec![Change::After(html("<span>!</span>"))],
            Event::Text {
                text,
                last_in_text_node,
                ..
            } if *last_in_text_node && text.is_empty() => vec![],
            Event::Text { .. } => vec![Change::Remove],
            Event::Comment { .. } => vec![Change::Remove],
            Event::DocumentEnd => vec![Change::Append(html("<!-- end -->"))],
            _ => vec![],
        },
    );
    assert_eq!(
        out,
        "<!DOCTYPE html><html><body><a href=\"https://example.com/x\">link</a><span>!</span><p></p></body></html><!-- end -->"
    );
    assert!(
        matches!(&stops[0], Event::Doctype { name: Some(n), .. } if n == "html"),
        "{stops:?}"
    );
    assert!(
        matches!(&stops[1], Event::Element { attributes, .. } if attributes == &[("href".to_string(), "/x".to_string())]),
        "the attribute split over two chunks is whole: {stops:?}"
    );
}

#[test]
fn a_change_that_does_not_fit_stops_the_rewriter_with_the_reason() {
    let (input_tx, input_rx) = mpsc::sync_channel(1);
    let (output_tx, mut output_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        parse::run(
            vec![on("p", false, false, true)],
            DocumentHandlers::default(),
            input_rx,
            output_tx,
        )
    });
    input_tx
        .send(Input::Chunk(b"<p>text</p>".to_vec()))
        .unwrap();
    loop {
        match output_rx.blocking_recv().unwrap() {
            Ok(Event::Output(_)) => {}
            Ok(Event::Text { .. }) => {
                input_tx
                    .send(Input::Changes(vec![Change::SetAttribute(
                        "a".into(),
                        "b".into(),
                    )]))
                    .unwrap();
            }
            Ok(other) => panic!("{other:?}"),
            Err(reason) => {
                assert!(
                    reason.contains("cannot be applied to a text chunk"),
                    "{reason}"
                );
                break;
            }
        }
    }
}

#[test]
fn content_waiting_for_end_tags_is_bounded_and_given_back_as_they_pass() {
    let mib = "x".repeat(1 << 20);
    let append = |_: &Event| vec![Change::Append(html(&mib)), Change::After(html("!"))];
    // Closed at once: each element's content goes out with its end tag.
    let closed = vec!["<div></div>"; 40];
    let (out, stops) = rewrite(
        vec![on("div", true, false, false)],
        DocumentHandlers::default(),
        &closed,
        append,
    );
    assert_eq!(stops.len(), 40);
    assert_eq!(out.len(), 40 * ((1 << 20) + "<div></div>!".len()));
    // Closed by an outer end tag (`</div>` closes the `<p>`, whose
    // appended content lol_html drops): nothing is refused.
    let implied = vec!["<div><p>x</div>"; 40];
    let (_, stops) = rewrite(
        vec![on("div", true, false, false), on("p", true, false, false)],
        DocumentHandlers::default(),
        &implied,
        append,
    );
    assert_eq!(stops.len(), 80);

    // Never closed: the content would wait to the page's end.
    let (input_tx, input_rx) = mpsc::sync_channel(1);
    let (output_tx, mut output_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        parse::run(
            vec![on("div", true, false, false)],
            DocumentHandlers::default(),
            input_rx,
            output_tx,
        )
    });
    let mut answered = 0;
    'page: for _ in 0..40 {
        input_tx.send(Input::Chunk(b"<div>".to_vec())).unwrap();
        loop {
            match output_rx.blocking_recv().unwrap() {
                Ok(Event::Output(_)) => {}
                Ok(Event::NeedInput) => break,
                Ok(stop @ Event::Element { .. }) => {
                    answered += 1;
                    input_tx.send(Input::Changes(append(&stop))).unwrap();
                }
                Ok(other) => panic!("{other:?}"),
                Err(reason) => {
                    assert!(reason.contains("past the 8388608-byte limit"), "{reason}");
                    break 'page;
                }
            }
        }
    }
    assert_eq!(answered, 8, "the eighth MiB is the one past the limit");
}

#[test]
fn the_guests_wit_is_the_hosts() {
    let host = include_str!("../../../wit/html/html.wit");
    let guest = include_str!("../../../workers/wit/deps/html/html.wit");
    assert_eq!(
        host, guest,
        "workers/wit/deps/html/html.wit must be a copy of wit/html/html.wit"
    );
}

mod host_calls {
    //! The host side as a hostile guest would drive it: calls out of turn,
    //! oversized chunks, invalid selectors, a flood of rewriters.
    use crate::generated::edge::html::rewriter as api;
    use crate::{
        Html, MAX_CHUNK_BYTES, MAX_PER_INSTANCE, MAX_SELECTOR_BYTES, MAX_SELECTORS, Rewriters,
    };
    use api::HostRewriter;
    use wasmtime::component::ResourceTable;

    fn selector(s: &str) -> api::SelectorHandlers {
        api::SelectorHandlers {
            selector: s.into(),
            element: true,
            comments: false,
            text: false,
        }
    }

    fn no_document() -> api::DocumentHandlers {
        api::DocumentHandlers {
            doctype: false,
            comments: false,
            text: false,
            end: false,
        }
    }

    #[tokio::test]
    async fn calls_out_of_turn_oversized_chunks_and_bad_selectors_are_refused() {
        let (mut rewriters, mut table) = (Rewriters::default(), ResourceTable::new());
        let mut html = Html {
            rewriters: &mut rewriters,
            table: &mut table,
        };
        let e = html
            .create(vec![selector("p"), selector("div[")], no_document())
            .unwrap()
            .unwrap_err();
        assert!(e.starts_with("selector 1 (\"div[\") is not valid"), "{e}");
        // lol_html tries every selector on every start tag: a rewriter
        // has a bounded number of them.
        let many = vec![selector("p"); MAX_SELECTORS + 1];
        let e = html.create(many, no_document()).unwrap().unwrap_err();
        assert!(e.contains("at most 256 selectors"), "{e}");
        let long = vec![selector(&format!(
            "p[a=\"{}\"]",
            "x".repeat(MAX_SELECTOR_BYTES)
        ))];
        let e = html.create(long, no_document()).unwrap().unwrap_err();
        assert!(e.contains("of 16384 bytes in all"), "{e}");
        let r = html
            .create(vec![selector("p")], no_document())
            .unwrap()
            .unwrap();
        let again = || wasmtime::component::Resource::<crate::Rewriter>::new_own(r.rep());
        assert!(
            html.next(again())
                .await
                .unwrap()
                .unwrap_err()
                .contains("expects write or end")
        );
        assert!(
            html.respond(again(), vec![])
                .unwrap()
                .unwrap_err()
                .contains("out of turn")
        );
        let big = vec![b'x'; MAX_CHUNK_BYTES + 1];
        assert!(
            html.write(again(), big)
                .unwrap()
                .unwrap_err()
                .contains("at most 65536")
        );
        html.write(again(), b"<p>x</p>".to_vec()).unwrap().unwrap();
        assert!(
            html.write(again(), b"more".to_vec())
                .unwrap()
                .unwrap_err()
                .contains("expects next")
        );
        let stop = html.next(again()).await.unwrap().unwrap();
        assert!(matches!(stop, api::Event::Element(_)), "{stop:?}");
        assert!(
            html.next(again())
                .await
                .unwrap()
                .unwrap_err()
                .contains("expects respond")
        );
        html.respond(again(), vec![api::Change::Remove])
            .unwrap()
            .unwrap();
        HostRewriter::drop(&mut html, r).unwrap();
    }

    /// A tenant's lane that adds up what is charged to it.
    #[derive(Default)]
    struct Meter(std::sync::Mutex<std::time::Duration>);

    impl edge_blocking::Lane for Meter {
        fn charge(&self, cpu: std::time::Duration) {
            *self.0.lock().unwrap() += cpu;
        }
        fn in_background(&self) -> bool {
            false
        }
        fn long_task(&self) {}
    }

    #[tokio::test]
    async fn the_parsing_is_charged_to_the_tenant() {
        let meter = std::sync::Arc::new(Meter::default());
        let tenant = std::sync::Arc::default();
        let work = edge_blocking::TenantWork::new(meter.clone());
        let (mut rewriters, mut table) =
            (Rewriters::for_tenant(tenant, work), ResourceTable::new());
        let mut html = Html {
            rewriters: &mut rewriters,
            table: &mut table,
        };
        let r = html
            .create(vec![selector("q")], no_document())
            .unwrap()
            .unwrap();
        let again = || wasmtime::component::Resource::<crate::Rewriter>::new_own(r.rep());
        let page = "<p class=a>x</p>".repeat(MAX_CHUNK_BYTES / 16);
        for _ in 0..32 {
            html.write(again(), page.clone().into_bytes())
                .unwrap()
                .unwrap();
            while !matches!(
                html.next(again()).await.unwrap().unwrap(),
                api::Event::NeedInput
            ) {}
        }
        HostRewriter::drop(&mut html, r).unwrap();
        // Charged as it parses, all of it once its thread ends.
        for _ in 0..500 {
            if !meter.0.lock().unwrap().is_zero() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!meter.0.lock().unwrap().is_zero(), "nothing charged");
    }

    #[test]
    fn a_tenant_runs_at_most_its_share_of_rewriting_threads() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let tenant = std::sync::Arc::new(AtomicUsize::new(crate::MAX_THREADS_PER_TENANT));
        let (mut rewriters, mut table) = (
            Rewriters::for_tenant(tenant.clone(), Default::default()),
            ResourceTable::new(),
        );
        let mut html = Html {
            rewriters: &mut rewriters,
            table: &mut table,
        };
        // Its other instances' threads fill the tenant's share.
        let e = html
            .create(vec![selector("p")], no_document())
            .unwrap()
            .unwrap_err();
        assert!(
            e.contains("this tenant runs 64 HTML rewriters already"),
            "{e}"
        );
        assert_eq!(
            tenant.load(Ordering::Acquire),
            crate::MAX_THREADS_PER_TENANT
        );
        // One ends: one more runs, counted until its thread ends.
        tenant.fetch_sub(1, Ordering::AcqRel);
        let r = html
            .create(vec![selector("p")], no_document())
            .unwrap()
            .unwrap();
        assert_eq!(
            tenant.load(Ordering::Acquire),
            crate::MAX_THREADS_PER_TENANT
        );
        HostRewriter::drop(&mut html, r).unwrap();
        for _ in 0..500 {
            if tenant.load(Ordering::Acquire) < crate::MAX_THREADS_PER_TENANT {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(
            tenant.load(Ordering::Acquire),
            crate::MAX_THREADS_PER_TENANT - 1
        );
    }

    #[test]
    fn an_instance_holds_at_most_its_share_of_rewriters() {
        let (mut rewriters, mut table) = (Rewriters::default(), ResourceTable::new());
        let mut html = Html {
            rewriters: &mut rewriters,
            table: &mut table,
        };
        let held: Vec<_> = (0..MAX_PER_INSTANCE)
            .map(|_| {
                html.create(vec![selector("p")], no_document())
                    .unwrap()
                    .unwrap()
            })
            .collect();
        let e = html
            .create(vec![selector("p")], no_document())
            .unwrap()
            .unwrap_err();
        assert!(e.contains("already has 16 HTML rewriters open"), "{e}");
        for r in held {
            HostRewriter::drop(&mut html, r).unwrap();
        }
        // Dropped ones make room again.
        let r = html
            .create(vec![selector("p")], no_document())
            .unwrap()
            .unwrap();
        HostRewriter::drop(&mut html, r).unwrap();
    }
}
