//! Files and directories a guest opens through `wasi:filesystem` hold
//! places among its tenant's open descriptors ([`edge_open_files`]).
//!
//! Each `open-at` is a descriptor of the host process, bounded by
//! wasmtime-wasi only by the instance's resource table; a tenant's
//! instances together could take the process's last descriptors, and then
//! every tenant's `accept` fails. So `open-at` (WASI 0.2 and 0.3) is
//! linked over the library's to take a place first; past the tenant's
//! `max_open_files` (or the host's share for guests) it fails with
//! `quota`. A descriptor's end is not reported to the host, so the places
//! of descriptors the instance closed are given back when it opens its
//! next one (the table says which are gone) and, at the latest, when the
//! instance ends, as [`crate::sockets`] does for sockets.

use crate::state::HostState;
use edge_open_files::OpenFile;
use std::collections::HashMap;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::TrappableError;
use wasmtime_wasi::filesystem::Descriptor;

/// The interfaces as wasmtime-wasi 48 names them.
const P2: &str = "wasi:filesystem/types@0.2.12";
const P3: &str = "wasi:filesystem/types@0.3.0";

/// The places an instance's open descriptors hold, by table entry.
#[derive(Default)]
pub struct FilePlaces {
    held: HashMap<u32, OpenFile>,
}

impl FilePlaces {
    /// Gives back the places of descriptors no longer in the table.
    fn sweep(&mut self, table: &ResourceTable) {
        self.held
            .retain(|rep, _| table.get(&Resource::<Descriptor>::new_borrow(*rep)).is_ok());
    }
}

impl HostState {
    /// A place for one more open descriptor, the closed ones' given back
    /// first; `None` at the tenant's or the host's cap.
    fn file_place(&mut self) -> Option<OpenFile> {
        let (table, places, files) = self.table_and_file_places();
        places.sweep(table);
        files.open()
    }

    /// What the library made of an open: the descriptor now holding
    /// `place`, the guest's error code (the place given back), or a trap.
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
                self.table_and_file_places().1.held.insert(d.rep(), place);
                Ok(Ok(d))
            }
            Err(e) => Ok(Err(e.downcast()?)),
        }
    }
}

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
