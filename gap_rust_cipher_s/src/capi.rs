//! C entry points for C firmware: open a cluster engine for N cores, encrypt / decrypt a buffer,
//! close. Header: `gap_rust_cipher_s/include/gap_rust_cipher_s.h` (kept in sync by
//! `tests/capi_header.rs`; exercised from C by `tests/capi_test.c`, `make capi-test`).
//!
//! Compiled with one backend feature: `host` (threads; what the C test program links), `pmsis`
//! (GAP SDK) or `bare` (GAP8 without SDK). Every function returns a status code (`GAPCS_OK` = 0 or a
//! negative `GAPCS_ERR_*`) and never unwinds into C: with `host` a panic is caught and reported as
//! `GAPCS_ERR_PANIC`; the no_std builds have no panicking path here (checked arithmetic, no
//! indexing, pointers checked for NULL).
//!
//! Handles: with `host` every `gapcs_engine_open` creates an independent engine (heap). On the chip
//! there is one cluster, so the `pmsis` / `bare` builds hold one engine in static storage; a second
//! open returns `GAPCS_ERR_BUSY`, and these builds must be called from one FC thread only.
#![allow(non_camel_case_types, clippy::missing_safety_doc)]

use crate::engine::{ClusterEngine, Config};
use crate::{CipherId, KeystreamApplier, KeystreamError};
use core::ffi::c_char;
use gap_rust_wrapper::Error;

#[cfg(feature = "host")]
extern crate std;

macro_rules! constants {
    ($($(#[$m:meta])* $name:ident = $v:expr;)*) => {
        $( $(#[$m])* pub const $name: i32 = $v; )*
        /// Every `GAPCS_*` constant with its value, as the header must define it.
        pub const CONSTANTS: &[(&str, i32)] = &[$((stringify!($name), $name)),*];
    };
}

constants! {
    /// ChaCha20 (RFC 8439): 32-byte key, 12-byte nonce, 32-bit block counter.
    GAPCS_CIPHER_CHACHA20 = CipherId::ChaCha20 as i32;
    /// AES-128-CTR (SP 800-38A): 16-byte key, 16-byte initial counter block.
    GAPCS_CIPHER_AES128_CTR = CipherId::Aes128Ctr as i32;
    /// Success.
    GAPCS_OK = 0;
    /// A required pointer is NULL.
    GAPCS_ERR_NULL = -1;
    /// Core count not in 1..=8, or a zero / too large buffer size.
    GAPCS_ERR_CONFIG = -2;
    /// Unknown cipher id.
    GAPCS_ERR_CIPHER = -3;
    /// Key length wrong for the cipher.
    GAPCS_ERR_KEY_LENGTH = -4;
    /// IV / nonce length wrong for the cipher.
    GAPCS_ERR_IV_LENGTH = -5;
    /// The keystream would run past the cipher's counter range; nothing was written.
    GAPCS_ERR_COUNTER_OVERFLOW = -6;
    /// L1 / L2 memory for the engine could not be allocated.
    GAPCS_ERR_NO_MEMORY = -7;
    /// The single on-chip engine is already open.
    GAPCS_ERR_BUSY = -8;
    /// The cluster, a fork or the DMA failed.
    GAPCS_ERR_ENGINE = -9;
    /// Input and output overlap without being the same buffer.
    GAPCS_ERR_OVERLAP = -10;
    /// An internal panic was caught (host builds only).
    GAPCS_ERR_PANIC = -11;
    /// A length above `PTRDIFF_MAX` (`isize::MAX`), or a buffer running past the end of the
    /// address space: no such buffer exists; nothing was read or written.
    GAPCS_ERR_LENGTH = -12;
    /// Default L1 buffer size used when `buffer_size` is 0 (three such buffers are allocated).
    GAPCS_DEFAULT_BUFFER = 8192;
    /// Largest core count.
    GAPCS_MAX_CORES = 8;
}

#[cfg(feature = "host")]
type Cl = gap_rust_sdk::host::HostCluster;
#[cfg(all(feature = "pmsis", not(feature = "host")))]
type Cl = gap_rust_sdk::pmsis::PmsisCluster;
#[cfg(all(feature = "bare", not(any(feature = "host", feature = "pmsis"))))]
type Cl = gap_rust_sdk::bare::BareCluster;

/// An open engine. Opaque to C (`typedef struct gapcs_engine gapcs_engine;`).
pub struct gapcs_engine {
    engine: ClusterEngine<'static, Cl>,
}

fn status(e: KeystreamError) -> i32 {
    match e {
        KeystreamError::KeyLength => GAPCS_ERR_KEY_LENGTH,
        KeystreamError::IvLength => GAPCS_ERR_IV_LENGTH,
        KeystreamError::CounterOverflow => GAPCS_ERR_COUNTER_OVERFLOW,
        _ => GAPCS_ERR_ENGINE,
    }
}

fn open_status(e: Error) -> i32 {
    match e {
        Error::Config => GAPCS_ERR_CONFIG,
        Error::Alloc(_) => GAPCS_ERR_NO_MEMORY,
        _ => GAPCS_ERR_ENGINE,
    }
}

/// Runs `f`, turning a panic into `GAPCS_ERR_PANIC` (host) — no unwinding crosses into C.
#[cfg(feature = "host")]
fn guard(f: impl FnOnce() -> i32) -> i32 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(GAPCS_ERR_PANIC)
}
#[cfg(not(feature = "host"))]
fn guard(f: impl FnOnce() -> i32) -> i32 {
    f()
}

fn config(cores: u32, buffer_size: u32) -> Result<Config, i32> {
    let cores = usize::try_from(cores).map_err(|_| GAPCS_ERR_CONFIG)?;
    let buffer = if buffer_size == 0 {
        GAPCS_DEFAULT_BUFFER as usize
    } else {
        buffer_size as usize
    };
    if !(1..=GAPCS_MAX_CORES as usize).contains(&cores) {
        return Err(GAPCS_ERR_CONFIG);
    }
    Ok(Config::new(cores, buffer))
}

#[cfg(feature = "host")]
mod storage {
    //! Host: every handle is a heap allocation owning its own simulated cluster.
    use super::*;
    use std::boxed::Box;

    pub(super) fn open(cfg: Config) -> Result<*mut gapcs_engine, i32> {
        let cluster: &'static mut Cl = Box::leak(Box::new(Cl::new()));
        let cluster: &'static Cl = cluster;
        match ClusterEngine::new(cluster, cfg) {
            Ok(engine) => Ok(Box::into_raw(Box::new(gapcs_engine { engine }))),
            Err(e) => {
                // SAFETY: `cluster` came from `Box::leak` above and nothing borrows it any more
                // (the engine that would have was not created).
                drop(unsafe { Box::from_raw(cluster as *const Cl as *mut Cl) });
                Err(open_status(e))
            }
        }
    }

    /// # Safety
    /// `h` came from `open` and is not used afterwards.
    pub(super) unsafe fn close(h: *mut gapcs_engine) -> i32 {
        // SAFETY: caller contract: `h` is a live handle from `Box::into_raw`.
        let h = unsafe { Box::from_raw(h) };
        let cluster: *const Cl = h.engine_cluster();
        drop(h); // frees the engine's L1 buffers, which borrow the cluster
        // SAFETY: the cluster was leaked in `open` for this handle only; its last borrower (the
        // engine) is gone.
        drop(unsafe { Box::from_raw(cluster as *mut Cl) });
        GAPCS_OK
    }
}

#[cfg(not(feature = "host"))]
mod storage {
    //! On the chip: one cluster, so one engine, in static storage.
    use super::*;
    use core::cell::UnsafeCell;
    use core::mem::MaybeUninit;

    struct Slot {
        open: UnsafeCell<bool>,
        cluster: UnsafeCell<MaybeUninit<Cl>>,
        handle: UnsafeCell<MaybeUninit<gapcs_engine>>,
    }
    // SAFETY: the C API of the no_std builds is documented as single-threaded (one FC thread), so
    // the cells are never accessed concurrently.
    unsafe impl Sync for Slot {}

    static SLOT: Slot = Slot {
        open: UnsafeCell::new(false),
        cluster: UnsafeCell::new(MaybeUninit::uninit()),
        handle: UnsafeCell::new(MaybeUninit::uninit()),
    };

    fn open_cluster() -> Result<Cl, i32> {
        #[cfg(feature = "pmsis")]
        return Cl::open(Default::default()).map_err(|_| GAPCS_ERR_ENGINE);
        #[cfg(not(feature = "pmsis"))]
        return Cl::take().ok_or(GAPCS_ERR_BUSY);
    }

    pub(super) fn open(cfg: Config) -> Result<*mut gapcs_engine, i32> {
        // SAFETY: single-threaded (see `Slot`); the flag says whether the cells are initialised.
        unsafe {
            if *SLOT.open.get() {
                return Err(GAPCS_ERR_BUSY);
            }
            let cluster: &'static Cl = (*SLOT.cluster.get()).write(open_cluster()?);
            match ClusterEngine::new(cluster, cfg) {
                Ok(engine) => {
                    *SLOT.open.get() = true;
                    Ok((*SLOT.handle.get()).write(gapcs_engine { engine }))
                }
                Err(e) => {
                    (*SLOT.cluster.get()).assume_init_drop();
                    Err(open_status(e))
                }
            }
        }
    }

    /// # Safety
    /// `h` came from `open` and is not used afterwards.
    pub(super) unsafe fn close(h: *mut gapcs_engine) -> i32 {
        // SAFETY: single-threaded; `h` must be the static handle and the slot open.
        unsafe {
            if !*SLOT.open.get() || h != (*SLOT.handle.get()).as_mut_ptr() {
                return GAPCS_ERR_NULL;
            }
            (*SLOT.handle.get()).assume_init_drop(); // engine (L1 buffers) first
            (*SLOT.cluster.get()).assume_init_drop(); // then the cluster
            *SLOT.open.get() = false;
        }
        GAPCS_OK
    }
}

#[cfg(feature = "host")]
impl gapcs_engine {
    fn engine_cluster(&self) -> *const Cl {
        self.engine.cluster()
    }
}

/// Opens the cluster engine: `cores` cores (1..=8), three L1 buffers of `buffer_size` bytes
/// (0 = `GAPCS_DEFAULT_BUFFER`). On success `*out` is the handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapcs_engine_open(
    cores: u32,
    buffer_size: u32,
    out: *mut *mut gapcs_engine,
) -> i32 {
    guard(|| {
        if out.is_null() {
            return GAPCS_ERR_NULL;
        }
        let handle = match config(cores, buffer_size).and_then(storage::open) {
            Ok(h) => h,
            Err(code) => return code,
        };
        // SAFETY: `out` is non-null and, per the header, points to writable storage for a pointer.
        unsafe { out.write(handle) };
        GAPCS_OK
    })
}

/// Closes an engine and frees everything it allocated. `NULL` is accepted and does nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapcs_engine_close(engine: *mut gapcs_engine) -> i32 {
    guard(|| {
        if engine.is_null() {
            return GAPCS_OK;
        }
        // SAFETY: per the header, `engine` came from `gapcs_engine_open` and is not used again.
        unsafe { storage::close(engine) }
    })
}

/// Uses `cores` cores (1..=8) from the next call on.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapcs_engine_set_cores(engine: *mut gapcs_engine, cores: u32) -> i32 {
    guard(|| {
        // SAFETY: per the header, a non-null `engine` is a live handle used by one thread at a time.
        let Some(h) = (unsafe { engine.as_mut() }) else {
            return GAPCS_ERR_NULL;
        };
        match h.engine.engine().set_cores(cores as usize) {
            Ok(()) => GAPCS_OK,
            Err(_) => GAPCS_ERR_CONFIG,
        }
    })
}

/// Whether `len` bytes at `p` can be one buffer at all: at most `isize::MAX` bytes (what
/// `core::slice::from_raw_parts` requires) and not running past the end of the address space.
fn span_ok(p: *const u8, len: usize) -> bool {
    len <= isize::MAX as usize && (p as usize).checked_add(len).is_some()
}

/// `len` bytes at `p` as a slice (`NULL` allowed when `len` is 0).
///
/// # Safety
/// A non-null `p` is valid for `len` bytes.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    // SAFETY: caller contract, and `p` is non-null.
    (!p.is_null()).then(|| unsafe { core::slice::from_raw_parts(p, len) })
}

/// XORs the keystream of `cipher` from byte position `offset` into `data[0..len]`, in place.
/// `key_len` / `iv_len` must be the cipher's (32 / 12 for ChaCha20, 16 / 16 for AES-128-CTR).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapcs_apply_keystream(
    engine: *mut gapcs_engine,
    cipher: u8,
    key: *const u8,
    key_len: usize,
    iv: *const u8,
    iv_len: usize,
    offset: u64,
    data: *mut u8,
    len: usize,
) -> i32 {
    guard(|| {
        // SAFETY: per the header, a non-null `engine` is a live handle used by one thread at a time.
        let Some(h) = (unsafe { engine.as_mut() }) else {
            return GAPCS_ERR_NULL;
        };
        let Some(id) = CipherId::from_u8(cipher) else {
            return GAPCS_ERR_CIPHER;
        };
        if !(span_ok(key, key_len) && span_ok(iv, iv_len) && span_ok(data, len)) {
            return GAPCS_ERR_LENGTH;
        }
        // SAFETY: per the header, non-null pointers are valid for the given lengths.
        let (Some(key), Some(iv)) = (unsafe { bytes(key, key_len) }, unsafe { bytes(iv, iv_len) })
        else {
            return GAPCS_ERR_NULL;
        };
        if len == 0 {
            return match h.engine.apply_keystream(id, key, iv, offset, &mut []) {
                Ok(()) => GAPCS_OK,
                Err(e) => status(e),
            };
        }
        if data.is_null() {
            return GAPCS_ERR_NULL;
        }
        // SAFETY: `data` is non-null and, per the header, valid for reads and writes of `len`
        // bytes and not accessed by anyone else during the call.
        let data = unsafe { core::slice::from_raw_parts_mut(data, len) };
        match h.engine.apply_keystream(id, key, iv, offset, data) {
            Ok(()) => GAPCS_OK,
            Err(e) => status(e),
        }
    })
}

/// Encrypts `input[0..len]` into `output[0..len]` (`output == input` for in place; partly
/// overlapping buffers are refused). ChaCha20: `key` 32 bytes, `nonce` 12 bytes, `counter` the
/// initial 32-bit block counter (RFC 8439). AES-128-CTR: `key` 16 bytes, `nonce` the 16-byte initial
/// counter block, `counter` a number of 16-byte blocks to skip (usually 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapcs_encrypt(
    engine: *mut gapcs_engine,
    cipher: u8,
    key: *const u8,
    nonce: *const u8,
    counter: u32,
    input: *const u8,
    output: *mut u8,
    len: usize,
) -> i32 {
    guard(|| {
        // SAFETY: per the header, a non-null `engine` is a live handle used by one thread at a time.
        let Some(h) = (unsafe { engine.as_mut() }) else {
            return GAPCS_ERR_NULL;
        };
        let Some(id) = CipherId::from_u8(cipher) else {
            return GAPCS_ERR_CIPHER;
        };
        // SAFETY: per the header, `key` and `nonce` point to the cipher's key and IV lengths.
        let (Some(key), Some(iv)) = (unsafe { bytes(key, id.key_len()) }, unsafe {
            bytes(nonce, id.iv_len())
        }) else {
            return GAPCS_ERR_NULL;
        };
        let offset = u64::from(counter) * id.block_len() as u64;
        if len == 0 {
            return match h.engine.apply_keystream(id, key, iv, offset, &mut []) {
                Ok(()) => GAPCS_OK,
                Err(e) => status(e),
            };
        }
        if input.is_null() || output.is_null() {
            return GAPCS_ERR_NULL;
        }
        if !(span_ok(input, len) && span_ok(output, len)) {
            return GAPCS_ERR_LENGTH;
        }
        let (i, o) = (input as usize, output as usize);
        let r = if i == o {
            // SAFETY: non-null, valid for `len` bytes read and written, not otherwise accessed.
            let data = unsafe { core::slice::from_raw_parts_mut(output, len) };
            h.engine.apply_keystream(id, key, iv, offset, data)
        } else {
            let overlap = i.checked_add(len).is_none_or(|ie| ie > o)
                && o.checked_add(len).is_none_or(|oe| oe > i);
            if overlap {
                return GAPCS_ERR_OVERLAP;
            }
            // SAFETY: non-null, disjoint (checked just above), valid for `len` bytes each.
            let (src, dst) = unsafe {
                (
                    core::slice::from_raw_parts(input, len),
                    core::slice::from_raw_parts_mut(output, len),
                )
            };
            h.engine.apply_keystream_b2b(id, key, iv, offset, src, dst)
        };
        match r {
            Ok(()) => GAPCS_OK,
            Err(e) => status(e),
        }
    })
}

/// Decrypts: the same operation as [`gapcs_encrypt`] (a stream cipher's keystream XOR).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapcs_decrypt(
    engine: *mut gapcs_engine,
    cipher: u8,
    key: *const u8,
    nonce: *const u8,
    counter: u32,
    input: *const u8,
    output: *mut u8,
    len: usize,
) -> i32 {
    // SAFETY: same contract as `gapcs_encrypt`.
    unsafe { gapcs_encrypt(engine, cipher, key, nonce, counter, input, output, len) }
}

/// A static, NUL-terminated description of a status code.
#[unsafe(no_mangle)]
pub extern "C" fn gapcs_strerror(code: i32) -> *const c_char {
    let s: &'static core::ffi::CStr = match code {
        GAPCS_OK => c"ok",
        GAPCS_ERR_NULL => c"a required pointer is NULL",
        GAPCS_ERR_CONFIG => c"core count not in 1..8 or bad buffer size",
        GAPCS_ERR_CIPHER => c"unknown cipher id",
        GAPCS_ERR_KEY_LENGTH => c"wrong key length for the cipher",
        GAPCS_ERR_IV_LENGTH => c"wrong IV/nonce length for the cipher",
        GAPCS_ERR_COUNTER_OVERFLOW => c"keystream position past the end of the counter range",
        GAPCS_ERR_NO_MEMORY => c"not enough L1/L2 memory for the engine",
        GAPCS_ERR_BUSY => c"the cluster engine is already open",
        GAPCS_ERR_ENGINE => c"cluster, fork or DMA failure",
        GAPCS_ERR_OVERLAP => c"input and output overlap",
        GAPCS_ERR_PANIC => c"internal error (panic caught)",
        GAPCS_ERR_LENGTH => c"length above PTRDIFF_MAX or buffer past the end of memory",
        _ => c"unknown status code",
    };
    s.as_ptr()
}
