#![no_std]
#![deny(unsafe_code)]

#[cfg(any(feature = "alloc", test))]
extern crate alloc;

pub mod aead;
pub mod cpx;
pub mod suite;

#[cfg(test)]
pub(crate) mod test_util {
    use alloc::vec::Vec;
    /// Hex to bytes; whitespace ignored. Panics on bad input (tests only).
    pub fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        s.chunks(2).map(|c| u8::from_str_radix(core::str::from_utf8(c).unwrap(), 16).unwrap()).collect()
    }
}
