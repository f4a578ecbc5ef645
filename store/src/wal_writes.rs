//! The writer's WAL writes: a commit's frames in one `write` for up to 31 of them.
//!
//! SQLite writes each frame of a commit to the WAL with two calls of the VFS's `xWrite`: the
//! frame's 24-byte header, then its page. On Linux each is a `pwrite`, and each `pwrite` into
//! the page cache costs about a microsecond of kernel time whatever its size (the inode's times,
//! the folio's lookup, ext4's journal handle), so a commit of 80 frames paid for 160 calls. This
//! VFS wraps the default one (`unix`) and, for a WAL file alone, keeps the contiguous writes of
//! a commit in a buffer that goes to the file in one write: when the commit frame's page has
//! been written, and before anything else is done with the file (a read, a sync, a size, a
//! truncation, a close, a lock, a file control), so that SQLite sees the file exactly as if
//! each write had been made at once. Measured in docs/design/cpu-per-step.md.
//!
//! Why it is safe. A frame is part of the database only once a commit frame after it is in the
//! file and the wal-index's header names it; SQLite writes that header after `walFrames` has
//! written every frame, and by then the commit frame's page has flushed the buffer. A crash
//! while frames sit in the buffer is a crash before they were written: without their commit
//! frame, recovery ignores them, as it would have. A write that does not follow the buffer
//! (SQLite rewriting a frame it spilled earlier in the transaction) flushes the buffer first, so
//! writes reach the file in SQLite's order. A WAL on a device without power-safe overwrite is
//! left alone: SQLite then pads a commit to a sector boundary with copies of its last frame,
//! split around a sync, which the commit frame's detection here does not follow.

#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{CStr, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

/// The VFS's name, for `Connection::open_with_flags_and_vfs`.
const VFS_NAME: &CStr = c"seed-wal-writes";

/// The most a buffer holds before it is written out, a commit of more frames being written in
/// several writes: the `unix` VFS writes at most this much a call (its `seekAndWrite` masks the
/// size with `0x1ffff`), about 31 frames of 4 KiB pages.
const BUFFER_CAPACITY: usize = 0x1ffff;

/// The size of a WAL frame's header.
const FRAME_HEADER_SIZE: usize = 24;

thread_local! {
    /// The writes WAL files opened here have handed to the wrapped VFS on this thread: tests
    /// count them.
    static N_WAL_WRITES: Cell<u64> = const { Cell::new(0) };
}

/// The wrapped VFS and this one, registered once.
struct Registered {
    inner: *mut ffi::sqlite3_vfs,
}

// SAFETY: the pointer is SQLite's own default VFS, which lives as long as the process and which
// SQLite lets any thread use.
unsafe impl Send for Registered {}
unsafe impl Sync for Registered {}

static REGISTERED: OnceLock<Option<Registered>> = OnceLock::new();

/// Registers the VFS (once) and returns its name; `None` when the default VFS is not `unix`,
/// whose behaviour this one relies on, or when registering failed: the caller then opens its
/// connection with the default VFS.
pub(crate) fn vfs_name() -> Option<&'static CStr> {
    REGISTERED
        .get_or_init(|| {
            // SAFETY: sqlite3_vfs_find with NULL returns the default VFS (initializing SQLite
            // if needed); the struct copied is SQLite's, and the copy is leaked so that it lives
            // as long as SQLite may use it. Every method but xOpen is `unix`'s own, called with
            // this VFS: `unix` leaves its VFS argument unused there, and what SQLite reads of
            // the VFS itself (`mxPathname`, `iVersion`) the copy keeps.
            unsafe {
                let inner = ffi::sqlite3_vfs_find(ptr::null());
                if inner.is_null() || c"unix" != CStr::from_ptr((*inner).zName) {
                    return None;
                }
                let mut vfs: ffi::sqlite3_vfs = *inner;
                vfs.szOsFile = c_int::try_from(inner_offset()).ok()? + (*inner).szOsFile;
                vfs.zName = VFS_NAME.as_ptr();
                vfs.pNext = ptr::null_mut();
                vfs.xOpen = Some(open);
                let vfs = Box::into_raw(Box::new(vfs));
                if ffi::sqlite3_vfs_register(vfs, 0) != ffi::SQLITE_OK {
                    drop(Box::from_raw(vfs));
                    return None;
                }
                Some(Registered { inner })
            }
        })
        .as_ref()
        .map(|_| VFS_NAME)
}

/// How many writes WAL files opened here have made on this thread.
#[cfg(test)]
fn n_wal_writes() -> u64 {
    N_WAL_WRITES.get()
}

fn inner_vfs() -> *mut ffi::sqlite3_vfs {
    REGISTERED
        .get()
        .and_then(Option::as_ref)
        .map_or(ptr::null_mut(), |registered| registered.inner)
}

/// A WAL file: SQLite sees the `base`, the wrapped VFS's file sits `inner_offset()` bytes in.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    /// Whether writes are buffered; when not, each goes straight to the file.
    buffered: bool,
    pending: Pending,
}

/// Writes not yet handed to the file.
struct Pending {
    bytes: Vec<u8>,
    /// Where `bytes` go in the file.
    offset: i64,
    /// A commit frame's header is in `bytes`: the next write is its page, and is written out at
    /// once.
    commit_frame: bool,
}

/// Where the wrapped file starts in the memory SQLite gives a file: after a `WalFile`,
/// aligned for any field.
const fn inner_offset() -> usize {
    let align = 16;
    std::mem::size_of::<WalFile>().div_ceil(align) * align
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 1: SQLite maps shared memory and fetches pages through the database file, never
    // through its WAL, so a WAL file needs none of the later methods.
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let inner_vfs = inner_vfs();
    // SAFETY: SQLite calls xOpen with `file` pointing at szOsFile bytes (the wrapped VFS's
    // szOsFile plus inner_offset()), and with the VFS registered, so inner_vfs is set.
    unsafe {
        let Some(inner_open) = (*inner_vfs).xOpen else {
            (*file).pMethods = ptr::null();
            return ffi::SQLITE_CANTOPEN;
        };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            // Anything but a WAL: the wrapped VFS's file, at the start of the memory, as if
            // this VFS were not there.
            return inner_open(inner_vfs, name, file, flags, out_flags);
        }
        let inner = file
            .cast::<u8>()
            .add(inner_offset())
            .cast::<ffi::sqlite3_file>();
        let rc = inner_open(inner_vfs, name, inner, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            if let Some(methods) = (*inner).pMethods.as_ref()
                && let Some(close) = methods.xClose
            {
                close(inner);
            }
            (*file).pMethods = ptr::null();
            return rc;
        }
        let methods = &*(*inner).pMethods;
        // Left alone (see the module's notes) without power-safe overwrite.
        let buffered = methods
            .xDeviceCharacteristics
            .is_some_and(|characteristics| {
                characteristics(inner) & ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE != 0
            });
        ptr::write(
            file.cast::<WalFile>(),
            WalFile {
                base: ffi::sqlite3_file {
                    pMethods: &WAL_METHODS,
                },
                inner,
                buffered,
                pending: Pending {
                    bytes: Vec::new(),
                    offset: 0,
                    commit_frame: false,
                },
            },
        );
        rc
    }
}

/// The WAL file SQLite passes back.
///
/// # Safety
/// `file` was opened by `open` as a buffered WAL file and not yet closed.
unsafe fn wal<'a>(file: *mut ffi::sqlite3_file) -> &'a mut WalFile {
    // SAFETY: per the caller; SQLite uses a file from one thread at a time.
    unsafe { &mut *file.cast::<WalFile>() }
}

/// The wrapped file's methods.
///
/// # Safety
/// `inner` is an open file of the wrapped VFS.
unsafe fn methods<'a>(inner: *mut ffi::sqlite3_file) -> &'a ffi::sqlite3_io_methods {
    // SAFETY: per the caller.
    unsafe { &*(*inner).pMethods }
}

impl WalFile {
    /// Writes `len` bytes at `offset` straight to the file.
    ///
    /// # Safety
    /// `bytes` points at `len` readable bytes.
    unsafe fn write_through(&mut self, bytes: *const c_void, len: c_int, offset: i64) -> c_int {
        N_WAL_WRITES.set(N_WAL_WRITES.get() + 1);
        // SAFETY: `inner` is open while self is; the bytes per the caller.
        unsafe {
            match methods(self.inner).xWrite {
                Some(write) => write(self.inner, bytes, len, offset),
                None => ffi::SQLITE_IOERR_WRITE,
            }
        }
    }

    /// Hands what the buffer holds to the file. The buffer is emptied whatever the outcome: a
    /// failed write fails the transaction, and its frames are never part of the database.
    fn flush(&mut self) -> c_int {
        if self.pending.bytes.is_empty() {
            return ffi::SQLITE_OK;
        }
        let bytes = std::mem::take(&mut self.pending.bytes);
        self.pending.commit_frame = false;
        let rc = match c_int::try_from(bytes.len()) {
            // SAFETY: `bytes` holds `len` bytes.
            Ok(len) => unsafe {
                self.write_through(bytes.as_ptr().cast(), len, self.pending.offset)
            },
            Err(_) => ffi::SQLITE_IOERR_WRITE,
        };
        // Keep the allocation for the next commit.
        self.pending.bytes = bytes;
        self.pending.bytes.clear();
        rc
    }

    /// Buffers a write of SQLite's, or makes it, as the module's notes say.
    ///
    /// # Safety
    /// `bytes` points at `len` readable bytes.
    unsafe fn write(&mut self, bytes: *const c_void, len: c_int, offset: i64) -> c_int {
        let Ok(size) = usize::try_from(len) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        if !self.buffered {
            // SAFETY: per the caller.
            return unsafe { self.write_through(bytes, len, offset) };
        }
        let completes_commit = self.pending.commit_frame;
        let follows = !self.pending.bytes.is_empty()
            && self.pending.offset + self.pending.bytes.len() as i64 == offset;
        if !follows || self.pending.bytes.len() + size > BUFFER_CAPACITY {
            let rc = self.flush();
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        if size > BUFFER_CAPACITY {
            // SAFETY: per the caller.
            return unsafe { self.write_through(bytes, len, offset) };
        }
        // SAFETY: per the caller.
        let bytes = unsafe { std::slice::from_raw_parts(bytes.cast::<u8>(), size) };
        if self.pending.bytes.is_empty() {
            self.pending.offset = offset;
        }
        self.pending.bytes.extend_from_slice(bytes);
        if completes_commit {
            // The commit frame's page: every frame of the commit goes to the file now, before
            // SQLite names them in the wal-index.
            return self.flush();
        }
        if size == FRAME_HEADER_SIZE && bytes[4..8] != [0; 4] {
            // A frame's header whose "database size after commit" is set: a commit frame.
            self.pending.commit_frame = true;
        }
        ffi::SQLITE_OK
    }
}

/// Flushes the buffer, then calls the wrapped file's method `$method` with `$args`.
macro_rules! flushed {
    ($file:expr, $method:ident, $missing:expr $(, $arg:expr)*) => {{
        // SAFETY: SQLite passes back a file `open` made a buffered WAL file.
        let wal = unsafe { wal($file) };
        let rc = wal.flush();
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        // SAFETY: the wrapped file is open while the WAL file is.
        match unsafe { methods(wal.inner) }.$method {
            Some(method) => unsafe { method(wal.inner $(, $arg)*) },
            None => $missing,
        }
    }};
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file once, after its last use.
    unsafe {
        let wal = wal(file);
        let flushed = wal.flush();
        let closed = match methods(wal.inner).xClose {
            Some(close) => close(wal.inner),
            None => ffi::SQLITE_OK,
        };
        ptr::drop_in_place(file.cast::<WalFile>());
        (*file).pMethods = ptr::null();
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    bytes: *mut c_void,
    len: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    flushed!(file, xRead, ffi::SQLITE_IOERR_READ, bytes, len, offset)
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    bytes: *const c_void,
    len: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite passes back a buffered WAL file and `len` readable bytes.
    unsafe { wal(file).write(bytes, len, offset) }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    flushed!(file, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    flushed!(file, xSync, ffi::SQLITE_IOERR_FSYNC, flags)
}

unsafe extern "C" fn file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    flushed!(file, xFileSize, ffi::SQLITE_IOERR_FSTAT, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flushed!(file, xLock, ffi::SQLITE_IOERR_LOCK, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flushed!(file, xUnlock, ffi::SQLITE_IOERR_UNLOCK, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    flushed!(
        file,
        xCheckReservedLock,
        ffi::SQLITE_IOERR_CHECKRESERVEDLOCK,
        out
    )
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    flushed!(file, xFileControl, ffi::SQLITE_NOTFOUND, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite passes back a buffered WAL file; its wrapped file is open.
    unsafe {
        let wal = wal(file);
        methods(wal.inner)
            .xSectorSize
            .map_or(4096, |sector_size| sector_size(wal.inner))
    }
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite passes back a buffered WAL file; its wrapped file is open.
    unsafe {
        let wal = wal(file);
        methods(wal.inner)
            .xDeviceCharacteristics
            .map_or(0, |characteristics| characteristics(wal.inner))
    }
}

#[cfg(test)]
mod tests;
