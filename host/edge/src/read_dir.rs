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
//! directory or when the listing is dropped), and reads at most [`BATCH`]
//! entries per task on the blocking pool: no thread waits on the guest.
//!
//! Both versions' interfaces (0.2: the function, the stream resource and
//! its method; 0.3: the function) are linked over the library's, as
//! [`crate::open_files`] does for `open-at`. What a guest sees is the
//! library's behaviour: entries without `.` and `..`, each with its type
//! as `lstat` gives it (FIFOs and sockets named as such, where the library
//! says `unknown`); a name that is not UTF-8 ends the listing with
//! `illegal-byte-sequence`.

use crate::state::HostState;
use edge_open_files::OpenFile;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use wasmtime::component::{Linker, Resource, ResourceType};
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

/// Where the next entries come from.
enum Source {
    /// The directory the guest opened: a descriptor of its own (so its
    /// read position is the listing's) is opened by the first read.
    Unopened(Arc<std::fs::File>),
    Open(Dir),
}

/// What one task read: entries, then where the next come from (`None`
/// at the directory's end) or the error that ended the listing.
struct Batch {
    entries: Vec<Entry>,
    next: io::Result<Option<Source>>,
}

enum State {
    Idle(Source),
    Reading(tokio::task::JoinHandle<Batch>),
    Failed(io::Error),
    Ended,
}

/// A directory being listed.
struct Listing {
    state: State,
    /// Its place among the tenant's open files, while it may read.
    place: Option<OpenFile>,
}

impl Listing {
    fn new(dir: Arc<std::fs::File>, place: OpenFile) -> Self {
        Self {
            state: State::Idle(Source::Unopened(dir)),
            place: Some(place),
        }
    }

    /// The next entries: none once the directory has ended; an error
    /// once, after the entries read before it.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Vec<Entry>>> {
        loop {
            match &mut self.state {
                State::Ended => return Poll::Ready(Ok(Vec::new())),
                State::Failed(_) => {
                    let State::Failed(e) = std::mem::replace(&mut self.state, State::Ended) else {
                        unreachable!("matched above")
                    };
                    return Poll::Ready(Err(e));
                }
                State::Idle(_) => {
                    let State::Idle(source) = std::mem::replace(&mut self.state, State::Ended)
                    else {
                        unreachable!("matched above")
                    };
                    self.state =
                        State::Reading(tokio::task::spawn_blocking(move || read_batch(source)));
                }
                State::Reading(task) => {
                    let batch = ready!(Pin::new(task).poll(cx)).unwrap_or_else(|e| Batch {
                        entries: Vec::new(),
                        next: Err(io::Error::other(e)),
                    });
                    self.state = match batch.next {
                        Ok(Some(source)) => State::Idle(source),
                        Ok(None) => State::Ended,
                        Err(e) => State::Failed(e),
                    };
                    if !matches!(self.state, State::Idle(_)) {
                        // Its descriptor is closed: the place goes back.
                        self.place = None;
                    }
                    if !batch.entries.is_empty() {
                        return Poll::Ready(Ok(batch.entries));
                    }
                }
            }
        }
    }
}

/// Reads up to [`BATCH`] entries from `source` (on the blocking pool).
fn read_batch(source: Source) -> Batch {
    let mut entries = Vec::new();
    let mut dir = match source {
        Source::Open(dir) => dir,
        Source::Unopened(dir) => match open(&dir) {
            Ok(dir) => dir,
            Err(e) => {
                return Batch {
                    entries,
                    next: Err(e),
                };
            }
        },
    };
    while entries.len() < BATCH {
        let entry = match dir.read() {
            None => break,
            Some(Ok(entry)) => entry,
            Some(Err(e)) => {
                return Batch {
                    entries,
                    next: Err(e.into()),
                };
            }
        };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            return Batch {
                entries,
                next: Err(io::Error::from_raw_os_error(libc::EILSEQ)),
            };
        };
        let kind = match entry.file_type() {
            // A filesystem without types in its entries: ask for it.
            FileType::Unknown => {
                match dir.fd().and_then(|fd| {
                    rustix::fs::statat(fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                }) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(e) => {
                        return Batch {
                            entries,
                            next: Err(e.into()),
                        };
                    }
                }
            }
            kind => kind,
        };
        entries.push(Entry {
            name: name.to_owned(),
            kind,
        });
    }
    let next = if entries.len() < BATCH {
        None
    } else {
        Some(Source::Open(dir))
    };
    Batch {
        entries,
        next: Ok(next),
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
            Some(place) => Ok(Listing::new(dir, place)),
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
    linker.allow_shadowing(true);
    add_p2(linker)?;
    if concurrent {
        add_p3(linker)?;
    }
    linker.allow_shadowing(false);
    Ok(())
}

/// A WASI 0.2 `directory-entry-stream`: a listing and the entries of its
/// last batch the guest has not read yet.
struct EntryStream {
    listing: Listing,
    read: VecDeque<Entry>,
}

fn add_p2(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::filesystem::types::{
        DescriptorType, DirectoryEntry, ErrorCode,
    };
    let kind = |kind| match kind {
        FileType::RegularFile => DescriptorType::RegularFile,
        FileType::Directory => DescriptorType::Directory,
        FileType::Symlink => DescriptorType::SymbolicLink,
        FileType::Fifo => DescriptorType::Fifo,
        FileType::Socket => DescriptorType::Socket,
        FileType::CharacterDevice => DescriptorType::CharacterDevice,
        FileType::BlockDevice => DescriptorType::BlockDevice,
        FileType::Unknown => DescriptorType::Unknown,
    };
    let mut i = linker.instance(P2)?;
    i.resource(
        "directory-entry-stream",
        ResourceType::host::<EntryStream>(),
        |mut store, rep| {
            let state: &mut HostState = store.data_mut();
            state
                .table()
                .delete(Resource::<EntryStream>::new_own(rep))?;
            Ok(())
        },
    )?;
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
                    if let Some(entry) = stream.read.pop_front() {
                        let entry = DirectoryEntry {
                            type_: kind(entry.kind),
                            name: entry.name,
                        };
                        return Ok((Ok(Some(entry)),));
                    }
                    match std::future::poll_fn(|cx| stream.listing.poll_next(cx)).await {
                        Ok(entries) if entries.is_empty() => return Ok((Ok(None),)),
                        Ok(entries) => stream.read.extend(entries),
                        Err(e) => return Ok((Err(ErrorCode::from(e)),)),
                    }
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
            match this.listing.poll_next(cx) {
                Poll::Pending if finish => Poll::Ready(Ok(StreamResult::Cancelled)),
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(entries)) if entries.is_empty() => {
                    this.end(Ok(()));
                    Poll::Ready(Ok(StreamResult::Dropped))
                }
                Poll::Ready(Ok(entries)) => {
                    let entries: Vec<DirectoryEntry> = entries
                        .into_iter()
                        .map(|e| DirectoryEntry {
                            type_: match e.kind {
                                FileType::RegularFile => DescriptorType::RegularFile,
                                FileType::Directory => DescriptorType::Directory,
                                FileType::Symlink => DescriptorType::SymbolicLink,
                                FileType::Fifo => DescriptorType::Fifo,
                                FileType::Socket => DescriptorType::Socket,
                                FileType::CharacterDevice => DescriptorType::CharacterDevice,
                                FileType::BlockDevice => DescriptorType::BlockDevice,
                                FileType::Unknown => DescriptorType::Other(None),
                            },
                            name: e.name,
                        })
                        .collect();
                    dst.set_buffer(entries.into());
                    Poll::Ready(Ok(StreamResult::Completed))
                }
                Poll::Ready(Err(e)) => {
                    this.end(Err(ErrorCode::from(e)));
                    Poll::Ready(Ok(StreamResult::Dropped))
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every entry of `dir`, read through a listing.
    async fn list(dir: &std::path::Path) -> io::Result<Vec<Entry>> {
        let files = Arc::new(edge_open_files::OpenFiles::new(8));
        let file = Arc::new(std::fs::File::open(dir).unwrap());
        let mut listing = Listing::new(file, files.open().unwrap());
        let mut all = Vec::new();
        loop {
            let entries = std::future::poll_fn(|cx| listing.poll_next(cx)).await?;
            if entries.is_empty() {
                assert!(
                    listing.place.is_none(),
                    "a listing at its end holds no place"
                );
                return Ok(all);
            }
            assert!(entries.len() <= BATCH);
            all.extend(entries);
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
        let mut entries = list(dir.path()).await.unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(entries.len(), 2 * BATCH + 5);
        assert_eq!(entries[0].name, "f000");
        assert_eq!(entries[0].kind, FileType::RegularFile);
        let kind = |name: &str| entries.iter().find(|e| e.name == name).unwrap().kind;
        assert_eq!(kind("sub"), FileType::Directory);
        assert_eq!(kind("link"), FileType::Symlink);
        assert!(entries.iter().all(|e| e.name != "." && e.name != ".."));
        assert!(
            list(tempfile::tempdir().unwrap().path())
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_name_that_is_not_utf8_ends_the_listing_with_its_error() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(std::ffi::OsStr::from_bytes(b"\xff")), b"").unwrap();
        let e = list(dir.path()).await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EILSEQ));
    }

    #[tokio::test]
    async fn a_listing_holds_its_place_until_its_end_or_its_drop() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(BATCH + 1) {
            std::fs::write(dir.path().join(format!("f{i}")), b"").unwrap();
        }
        let files = Arc::new(edge_open_files::OpenFiles::new(1));
        let file = Arc::new(std::fs::File::open(dir.path()).unwrap());
        let mut listing = Listing::new(file, files.open().unwrap());
        let first = std::future::poll_fn(|cx| listing.poll_next(cx))
            .await
            .unwrap();
        assert_eq!(first.len(), BATCH);
        // Mid-way, no thread is held, but the descriptor is: no place left.
        assert!(matches!(listing.state, State::Idle(Source::Open(_))));
        assert!(files.open().is_none());
        drop(listing);
        assert!(files.open().is_some());
    }
}
