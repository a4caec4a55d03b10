//! Directory listings (`read-directory` of `wasi:filesystem` 0.2 and 0.3),
//! read a batch of entries at a time, only as the guest reads them.
//!
//! wasmtime-wasi 48 reads a whole directory into memory for each WASI 0.2
//! listing, and for each 0.3 listing parks a thread of the blocking pool
//! (with two descriptors) until the guest has read every entry or dropped
//! the stream. A guest opening listings it never reads could so take every
//! thread of the pool that all tenants' disk, SQLite and key-value work
//! runs on, or hold a directory's entries many times over outside its
//! memory cap. Here a listing holds one descriptor, a place among its
//! tenant's open files (`max_open_files`, given back at the end of the
//! directory, or when the listing is dropped and no read of its runs), and
//! reads at most [`BATCH`] entries per task on the blocking pool (as the
//! tenant's work: [`edge_blocking`]): no thread waits on the guest.
//!
//! Both versions' interfaces (0.2: the function, the stream resource and
//! its method; 0.3: the function) are linked over the library's, as
//! [`crate::open_files`] does for `open-at`. What a guest sees is the
//! library's behaviour, with three differences: FIFOs and sockets are
//! named as such (the library says `unknown`); a listing reads the
//! directory as it is when each batch is read, not as it was at the call
//! (so an entry renamed meanwhile may show twice or not at all, as with
//! POSIX `readdir`); and an error opening the directory comes with the
//! first entry, not from `read-directory`. Entries come without `.` and
//! `..`, each with its type as `lstat` gives it; a name that is not UTF-8
//! (`illegal-byte-sequence`), or an entry `lstat` fails on (its error), is
//! an error in its place: a 0.2 read returns it and the next read goes on,
//! a 0.3 listing ends with it after the entries before it.

use crate::state::HostState;
use edge_open_files::OpenFile;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::Descriptor;

/// The interfaces as wasmtime-wasi 48 names them.
const P2: &str = "wasi:filesystem/types@0.2.12";
const P3: &str = "wasi:filesystem/types@0.3.0";

/// Entries one task reads: a few system calls' worth, so a task is short
/// and a listing holds little between the guest's reads.
const BATCH: usize = 64;

/// One entry of a directory.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    name: String,
    kind: FileType,
}

/// Where the next entries come from, with the place among the tenant's
/// open files that its descriptor holds: the two go into each task
/// together, so a listing dropped while a task reads gives the place back
/// only once that task has closed the descriptor.
struct Source {
    cursor: Cursor,
    place: OpenFile,
}

enum Cursor {
    /// The directory the guest opened: a descriptor of its own (so its
    /// read position is the listing's) is opened by the first read.
    Unopened(Arc<std::fs::File>),
    Open(Dir),
}

/// What one task read: entries, each or why it could not be read (a name
/// that is not UTF-8, a failed `lstat`; the listing goes on after it), and
/// where the next come from: `None` at the directory's end, or after an
/// error reading the directory itself (the last item).
struct Batch {
    items: Vec<io::Result<Entry>>,
    next: Option<Source>,
}

enum State {
    Idle(Source),
    Reading(tokio::task::JoinHandle<Batch>),
    Ended,
}

/// A directory being listed.
struct Listing {
    state: State,
    /// Where its reads run (the tenant's lane, its CPU).
    work: edge_blocking::TenantWork,
}

impl Listing {
    fn new(dir: Arc<std::fs::File>, place: OpenFile, work: edge_blocking::TenantWork) -> Self {
        Self {
            state: State::Idle(Source {
                cursor: Cursor::Unopened(dir),
                place,
            }),
            work,
        }
    }

    /// The next entries (or errors): none once the directory has ended.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Vec<io::Result<Entry>>> {
        loop {
            match &mut self.state {
                State::Ended => return Poll::Ready(Vec::new()),
                State::Idle(_) => {
                    let State::Idle(source) = std::mem::replace(&mut self.state, State::Ended)
                    else {
                        unreachable!("matched above")
                    };
                    self.state = State::Reading(self.work.spawn(move || read_batch(source)));
                }
                State::Reading(task) => {
                    let batch = ready!(Pin::new(task).poll(cx)).unwrap_or_else(|e| Batch {
                        items: vec![Err(io::Error::other(e))],
                        next: None,
                    });
                    self.state = match batch.next {
                        Some(source) => State::Idle(source),
                        None => State::Ended,
                    };
                    if !batch.items.is_empty() {
                        return Poll::Ready(batch.items);
                    }
                }
            }
        }
    }
}

impl Drop for Listing {
    fn drop(&mut self) {
        // A read not started yet never starts; one running finishes its
        // batch (a few system calls) and closes the descriptor, then gives
        // the place back.
        if let State::Reading(task) = &self.state {
            task.abort();
        }
    }
}

/// Reads up to [`BATCH`] entries from `source` (on the blocking pool).
fn read_batch(source: Source) -> Batch {
    let Source { cursor, place } = source;
    let mut items = Vec::new();
    let mut dir = match cursor {
        Cursor::Open(dir) => dir,
        Cursor::Unopened(dir) => match open(&dir) {
            Ok(dir) => dir,
            Err(e) => {
                items.push(Err(e));
                return Batch { items, next: None };
            }
        },
    };
    while items.len() < BATCH {
        let entry = match dir.read() {
            None => return Batch { items, next: None },
            Some(Ok(entry)) => entry,
            Some(Err(e)) => {
                items.push(Err(e.into()));
                return Batch { items, next: None };
            }
        };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            items.push(Err(io::Error::from_raw_os_error(libc::EILSEQ)));
            continue;
        };
        let kind = match entry.file_type() {
            // A filesystem without types in its entries: ask for it.
            FileType::Unknown => match dir
                .fd()
                .and_then(|fd| rustix::fs::statat(fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW))
            {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(e) => {
                    items.push(Err(e.into()));
                    continue;
                }
            },
            kind => kind,
        };
        items.push(Ok(Entry {
            name: name.to_owned(),
            kind,
        }));
    }
    Batch {
        items,
        next: Some(Source {
            cursor: Cursor::Open(dir),
            place,
        }),
    }
}

/// A descriptor of its own for reading `dir` from its start.
fn open(dir: &std::fs::File) -> io::Result<Dir> {
    let fd = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(Dir::new(fd)?)
}

impl HostState {
    /// A listing of the directory `fd`, or why not (a file; the tenant's
    /// or the host's cap of open files).
    fn listing(&mut self, fd: &Resource<Descriptor>) -> wasmtime::Result<Result<Listing, Refused>> {
        let dir = match self.table().get(fd)? {
            Descriptor::Dir(d) => Arc::clone(&d.dir),
            Descriptor::File(_) => return Ok(Err(Refused::NotDirectory)),
        };
        Ok(match self.open_files().open() {
            Some(place) => Ok(Listing::new(dir, place, self.blocking().clone())),
            None => Err(Refused::Quota),
        })
    }
}

/// Why a listing was not started.
#[derive(Clone, Copy, Debug)]
enum Refused {
    NotDirectory,
    Quota,
}

/// Links `read-directory` of both versions over the library's (call it
/// after wasmtime-wasi's own `add_to_linker`s).
pub fn add_to_linker(linker: &mut Linker<HostState>, concurrent: bool) -> wasmtime::Result<()> {
    crate::state::link_over_library(linker, concurrent, add_p2, add_p3)
}

/// The `descriptor-type` (of either WASI version's bindings, `$ty`) of an
/// entry of type `$kind`; `$unknown` for a type `lstat` did not say.
macro_rules! descriptor_type {
    ($ty:ident, $kind:expr, $($unknown:tt)+) => {
        match $kind {
            FileType::RegularFile => $ty::RegularFile,
            FileType::Directory => $ty::Directory,
            FileType::Symlink => $ty::SymbolicLink,
            FileType::Fifo => $ty::Fifo,
            FileType::Socket => $ty::Socket,
            FileType::CharacterDevice => $ty::CharacterDevice,
            FileType::BlockDevice => $ty::BlockDevice,
            FileType::Unknown => $ty::$($unknown)+,
        }
    };
}

/// A WASI 0.2 `directory-entry-stream`: a listing and the entries of its
/// last batch the guest has not read yet.
struct EntryStream {
    listing: Listing,
    read: VecDeque<io::Result<Entry>>,
}

fn add_p2(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::filesystem::types::{
        DescriptorType, DirectoryEntry, ErrorCode,
    };
    let mut i = linker.instance(P2)?;
    crate::state::link_table_resource::<EntryStream>(&mut i, "directory-entry-stream")?;
    i.func_wrap(
        "[method]descriptor.read-directory",
        |mut store, (fd,): (Resource<Descriptor>,)| {
            let state: &mut HostState = store.data_mut();
            let listing = match state.listing(&fd)? {
                Ok(listing) => listing,
                Err(Refused::NotDirectory) => return Ok((Err(ErrorCode::NotDirectory),)),
                Err(Refused::Quota) => return Ok((Err(ErrorCode::Quota),)),
            };
            let stream = EntryStream {
                listing,
                read: VecDeque::new(),
            };
            Ok((Ok(state.table().push(stream)?),))
        },
    )?;
    i.func_wrap_async(
        "[method]directory-entry-stream.read-directory-entry",
        move |mut store, (stream,): (Resource<EntryStream>,)| {
            Box::new(async move {
                let stream = store.data_mut().table().get_mut(&stream)?;
                loop {
                    match stream.read.pop_front() {
                        Some(Ok(entry)) => {
                            let entry = DirectoryEntry {
                                type_: descriptor_type!(DescriptorType, entry.kind, Unknown),
                                name: entry.name,
                            };
                            return Ok((Ok(Some(entry)),));
                        }
                        // As the library: this read fails, the next goes on.
                        Some(Err(e)) => return Ok((Err(ErrorCode::from(e)),)),
                        None => {}
                    }
                    let items = std::future::poll_fn(|cx| stream.listing.poll_next(cx)).await;
                    if items.is_empty() {
                        return Ok((Ok(None),));
                    }
                    stream.read.extend(items);
                }
            })
        },
    )?;
    Ok(())
}

fn add_p3(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime::component::{FutureReader, StreamReader};
    use wasmtime_wasi::p3::bindings::filesystem::types::{
        DescriptorType, DirectoryEntry, ErrorCode,
    };
    linker.instance(P3)?.func_wrap(
        "[method]descriptor.read-directory",
        |mut store, (fd,): (Resource<Descriptor>,)| {
            let (result, done) = tokio::sync::oneshot::channel();
            let entries = match store.data_mut().listing(&fd)? {
                Ok(listing) => StreamReader::new(
                    &mut store,
                    EntryProducer {
                        listing,
                        result: Some(result),
                    },
                )?,
                Err(refused) => {
                    let _ = result.send(Err(match refused {
                        Refused::NotDirectory => ErrorCode::NotDirectory,
                        Refused::Quota => ErrorCode::Quota,
                    }));
                    StreamReader::new(&mut store, std::iter::empty())?
                }
            };
            Ok(((entries, FutureReader::new(&mut store, done)?),))
        },
    )?;

    /// The write end of a WASI 0.3 listing's stream; its end (or error)
    /// goes to the listing's future.
    struct EntryProducer {
        listing: Listing,
        result: Option<tokio::sync::oneshot::Sender<Result<(), ErrorCode>>>,
    }

    impl EntryProducer {
        fn end(&mut self, result: Result<(), ErrorCode>) {
            if let Some(tx) = self.result.take() {
                let _ = tx.send(result);
            }
        }
    }

    impl Drop for EntryProducer {
        fn drop(&mut self) {
            // Dropped by the guest before the end: nothing went wrong.
            self.end(Ok(()));
        }
    }

    impl<D> wasmtime::component::StreamProducer<D> for EntryProducer {
        type Item = DirectoryEntry;
        type Buffer = wasmtime::component::VecBuffer<DirectoryEntry>;

        fn poll_produce<'a>(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            mut store: wasmtime::StoreContextMut<'a, D>,
            mut dst: wasmtime::component::Destination<'a, Self::Item, Self::Buffer>,
            finish: bool,
        ) -> Poll<wasmtime::Result<wasmtime::component::StreamResult>> {
            use wasmtime::component::StreamResult;
            // A zero-length read asks whether entries are ready; say yes
            // rather than read a batch the guest may never take.
            if dst.remaining(&mut store) == Some(0) {
                return Poll::Ready(Ok(StreamResult::Completed));
            }
            let this = self.get_mut();
            // Ended (an error): wasmtime polls again once the guest has
            // read what the last poll left; nothing more comes.
            if this.result.is_none() {
                return Poll::Ready(Ok(StreamResult::Dropped));
            }
            let items = match this.listing.poll_next(cx) {
                Poll::Pending if finish => return Poll::Ready(Ok(StreamResult::Cancelled)),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(items) => items,
            };
            if items.is_empty() {
                this.end(Ok(()));
                return Poll::Ready(Ok(StreamResult::Dropped));
            }
            // As the library: the first error ends the stream, after the
            // entries before it.
            let mut failed = None;
            let entries: Vec<DirectoryEntry> = items
                .into_iter()
                .map_while(|item| item.map_err(|e| failed = Some(e)).ok())
                .map(|e| DirectoryEntry {
                    type_: descriptor_type!(DescriptorType, e.kind, Other(None)),
                    name: e.name,
                })
                .collect();
            dst.set_buffer(entries.into());
            match failed {
                Some(e) => {
                    // Its descriptor closed, its place back.
                    this.listing.state = State::Ended;
                    this.end(Err(ErrorCode::from(e)));
                    Poll::Ready(Ok(StreamResult::Dropped))
                }
                None => Poll::Ready(Ok(StreamResult::Completed)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item of `dir`, read through a listing that holds a place of
    /// `files`; the listing at its end holds none.
    async fn list(dir: &std::path::Path) -> Vec<io::Result<Entry>> {
        let files = Arc::new(edge_open_files::OpenFiles::new(1));
        let file = Arc::new(std::fs::File::open(dir).unwrap());
        let mut listing = Listing::new(file, files.open().unwrap(), Default::default());
        let mut all = Vec::new();
        loop {
            let items = std::future::poll_fn(|cx| listing.poll_next(cx)).await;
            if items.is_empty() {
                assert!(
                    files.open().is_some(),
                    "a listing at its end holds no place"
                );
                return all;
            }
            assert!(items.len() <= BATCH);
            all.extend(items);
        }
    }

    #[tokio::test]
    async fn a_listing_reads_every_entry_in_batches_with_its_type() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(2 * BATCH + 3) {
            std::fs::write(dir.path().join(format!("f{i:03}")), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("f000", dir.path().join("link")).unwrap();
        let mut entries: Vec<Entry> = list(dir.path())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(entries.len(), 2 * BATCH + 5);
        assert_eq!(entries[0].name, "f000");
        assert_eq!(entries[0].kind, FileType::RegularFile);
        let kind = |name: &str| entries.iter().find(|e| e.name == name).unwrap().kind;
        assert_eq!(kind("sub"), FileType::Directory);
        assert_eq!(kind("link"), FileType::Symlink);
        assert!(entries.iter().all(|e| e.name != "." && e.name != ".."));
        assert!(list(tempfile::tempdir().unwrap().path()).await.is_empty());
    }

    #[tokio::test]
    async fn a_name_that_is_not_utf8_is_an_error_among_the_entries() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(std::ffi::OsStr::from_bytes(b"\xff")), b"").unwrap();
        std::fs::write(dir.path().join("ok"), b"").unwrap();
        let items = list(dir.path()).await;
        assert_eq!(items.len(), 2);
        let failed: Vec<_> = items.iter().filter_map(|i| i.as_ref().err()).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].raw_os_error(), Some(libc::EILSEQ));
        assert!(
            items
                .iter()
                .any(|i| i.as_ref().is_ok_and(|e| e.name == "ok"))
        );
    }

    #[tokio::test]
    async fn a_listing_holds_its_place_while_its_descriptor_is_open() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(BATCH + 1) {
            std::fs::write(dir.path().join(format!("f{i}")), b"").unwrap();
        }
        let files = Arc::new(edge_open_files::OpenFiles::new(1));
        let open = || Arc::new(std::fs::File::open(dir.path()).unwrap());
        let mut listing = Listing::new(open(), files.open().unwrap(), Default::default());
        let first = std::future::poll_fn(|cx| listing.poll_next(cx)).await;
        assert_eq!(first.len(), BATCH);
        // Mid-way, no thread is held, but the descriptor is: no place left.
        assert!(matches!(
            listing.state,
            State::Idle(Source {
                cursor: Cursor::Open(_),
                ..
            })
        ));
        assert!(files.open().is_none());
        drop(listing);
        assert!(files.open().is_some());

        // Dropped while a task reads: the place comes back once the task
        // has closed its descriptor, not before.
        let (started, release) = (
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(std::sync::Barrier::new(2)),
        );
        let mut listing = Listing::new(open(), files.open().unwrap(), Default::default());
        let (s, r) = (started.clone(), release.clone());
        // A task of the pool's that holds it until released, as a slow
        // disk would.
        let State::Idle(source) = std::mem::replace(&mut listing.state, State::Ended) else {
            unreachable!()
        };
        listing.state = State::Reading(tokio::task::spawn_blocking(move || {
            s.notify_one();
            r.wait();
            read_batch(source)
        }));
        started.notified().await;
        drop(listing);
        assert!(files.open().is_none(), "the running task holds the place");
        release.wait();
        // The task ends with nobody to take its batch: the place goes back.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while files.open().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the place never came back"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}
