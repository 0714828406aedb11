//! The C entry points check lengths before they make slices: `core::slice::from_raw_parts`
//! requires at most `isize::MAX` bytes that do not wrap around the address space, and a C caller
//! can pass any `size_t`. Such a length gets `GAPCS_ERR_LENGTH`, and nothing is read or written.
#![cfg(feature = "host")]

use gap_rust_cipher_s::capi::*;

#[test]
fn finding6_capi_refuses_lengths_above_isize_max() {
    let mut e: *mut gapcs_engine = core::ptr::null_mut();
    // SAFETY: `e` is a valid out-pointer.
    assert_eq!(unsafe { gapcs_engine_open(1, 4096, &mut e) }, GAPCS_OK);
    let key = [7u8; 32];
    let nonce = [9u8; 12];
    let mut data = [0u8; 64];
    let mut out = [0u8; 64];
    let huge = isize::MAX as usize + 1;
    let cc = GAPCS_CIPHER_CHACHA20 as u8;
    // SAFETY (every call): the pointers are valid for the lengths the functions may use once
    // they accept them; the lengths refused here are never used.
    unsafe {
        for len in [huge, usize::MAX] {
            let r = gapcs_apply_keystream(
                e,
                cc,
                key.as_ptr(),
                32,
                nonce.as_ptr(),
                12,
                0,
                data.as_mut_ptr(),
                len,
            );
            assert_eq!(r, GAPCS_ERR_LENGTH, "data length {len}");
            let r = gapcs_apply_keystream(
                e,
                cc,
                key.as_ptr(),
                len,
                nonce.as_ptr(),
                12,
                0,
                data.as_mut_ptr(),
                64,
            );
            assert_eq!(r, GAPCS_ERR_LENGTH, "key length {len}");
            let r = gapcs_apply_keystream(
                e,
                cc,
                key.as_ptr(),
                32,
                nonce.as_ptr(),
                len,
                0,
                data.as_mut_ptr(),
                64,
            );
            assert_eq!(r, GAPCS_ERR_LENGTH, "iv length {len}");
            let p = data.as_mut_ptr();
            let r = gapcs_encrypt(e, cc, key.as_ptr(), nonce.as_ptr(), 0, p, p, len);
            assert_eq!(r, GAPCS_ERR_LENGTH, "in place, {len}");
            let r = gapcs_encrypt(
                e,
                cc,
                key.as_ptr(),
                nonce.as_ptr(),
                0,
                p,
                out.as_mut_ptr(),
                len,
            );
            assert_eq!(r, GAPCS_ERR_LENGTH, "two buffers, {len}");
        }
        // Below isize::MAX but wrapping around the end of the address space.
        let end = usize::MAX - 10;
        let r = gapcs_apply_keystream(
            e,
            cc,
            key.as_ptr(),
            32,
            nonce.as_ptr(),
            12,
            0,
            end as *mut u8,
            64,
        );
        assert_eq!(r, GAPCS_ERR_LENGTH);
        assert_eq!(data, [0u8; 64], "nothing written");
        // A good call still works.
        let r = gapcs_encrypt(
            e,
            cc,
            key.as_ptr(),
            nonce.as_ptr(),
            0,
            data.as_ptr(),
            data.as_mut_ptr(),
            64,
        );
        assert_eq!(r, GAPCS_OK);
        assert_ne!(data, [0u8; 64]);
        let msg = core::ffi::CStr::from_ptr(gapcs_strerror(GAPCS_ERR_LENGTH));
        assert!(msg.to_str().unwrap().contains("PTRDIFF_MAX"));
        assert_eq!(gapcs_engine_close(e), GAPCS_OK);
    }
}
