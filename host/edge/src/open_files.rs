//! Files and directories a guest opens through `wasi:filesystem` hold
//! places among its tenant's open descriptors ([`edge_open_files`]).
//!
//! Each `open-at` is a descriptor of the host process, bounded by
//! wasmtime-wasi only by the instance's resource table; a tenant's
//! instances together could take the process's last descriptors, and then
//! every tenant's `accept` fails. So `open-at` (WASI 0.2 and 0.3) is
//! linked over the library's to take a place first; past the tenant's
//! `max_open_files` (or the host's share for guests) it fails with
//! `quota`. The descriptor's end is not reported to the host, and streams
//! read from it keep it open after its handle is dropped, so its place is
//! watched: given back once the last reference to the open file is gone.

use crate::state::HostState;
use edge_open_files::OpenFile;
use std::sync::Arc;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::TrappableError;
use wasmtime_wasi::filesystem::Descriptor;

/// The interfaces as wasmtime-wasi 48 names them.
const P2: &str = "wasi:filesystem/types@0.2.12";
const P3: &str = "wasi:filesystem/types@0.3.0";

impl HostState {
    /// A place for one more open descriptor; `None` at the tenant's or
    /// the host's cap.
    fn file_place(&self) -> Option<OpenFile> {
        self.open_files().open()
    }

    /// What the library made of an open: the descriptor, its place now
    /// watched; the guest's error code (the place given back); or a trap.
    fn file_holding<E>(
        &mut self,
        place: OpenFile,
        opened: Result<Resource<Descriptor>, TrappableError<E>>,
    ) -> wasmtime::Result<Result<Resource<Descriptor>, E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        match opened {
            Ok(d) => {
                let file = match self.table().get(&d)? {
                    Descriptor::File(f) => Arc::downgrade(&f.file),
                    Descriptor::Dir(d) => Arc::downgrade(&d.dir),
                };
                self.open_files().watch(place, file);
                Ok(Ok(d))
            }
            Err(e) => Ok(Err(e.downcast()?)),
        }
    }
}

/// The longest path `open-at` takes (Linux's `PATH_MAX`; the kernel
/// refuses longer ones anyway, but only once the call has waited its turn
/// on the blocking pool, holding the guest's path, up to its whole memory).
const MAX_PATH_BYTES: usize = 4096;

/// Links `open-at` of both versions over the library's (call it after
/// wasmtime-wasi's own `add_to_linker`s).
pub fn add_to_linker(linker: &mut Linker<HostState>, concurrent: bool) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::filesystem::types::{
        DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
    };
    linker.allow_shadowing(true);
    linker.instance(P2)?.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store,
         (dir, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                if path.len() > MAX_PATH_BYTES {
                    return Ok((Err(ErrorCode::NameTooLong),));
                }
                let state: &mut HostState = store.data_mut();
                let Some(place) = state.file_place() else {
                    return Ok((Err(ErrorCode::Quota),));
                };
                let opened = HostDescriptor::open_at(
                    &mut wasmtime_wasi::filesystem::WasiFilesystemView::filesystem(state),
                    dir,
                    path_flags,
                    path,
                    open_flags,
                    flags,
                )
                .await;
                Ok((state.file_holding(place, opened)?,))
            })
        },
    )?;
    if concurrent {
        add_p3(linker)?;
    }
    linker.allow_shadowing(false);
    Ok(())
}

fn add_p3(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::p3::bindings::filesystem::types::{
        DescriptorFlags, ErrorCode, HostDescriptorWithStore, OpenFlags, PathFlags,
    };
    linker.instance(P3)?.func_wrap_concurrent(
        "[method]descriptor.open-at",
        |store,
         (dir, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::pin(async move {
                if path.len() > MAX_PATH_BYTES {
                    return Ok((Err(ErrorCode::NameTooLong),));
                }
                let Some(place) = store.with(|mut s| s.get().file_place()) else {
                    return Ok((Err(ErrorCode::Quota),));
                };
                let filesystem = store.with_getter::<WasiFilesystem>(|s| s.filesystem());
                let opened = <WasiFilesystem as HostDescriptorWithStore<HostState>>::open_at(
                    &filesystem,
                    dir,
                    path_flags,
                    path,
                    open_flags,
                    flags,
                )
                .await;
                store.with(|mut s| Ok((s.get().file_holding(place, opened)?,)))
            })
        },
    )?;
    Ok(())
}
