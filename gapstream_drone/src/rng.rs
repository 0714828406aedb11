//! A ChaCha20 DRBG seeded from the drone's [`Entropy`] source: the protocol's handshake wants an
//! infallible `rand_core::CryptoRng`, while a hardware entropy source can fail. So the fallible
//! part (reading 32 seed bytes) happens first, with a proper error, and the handshake then draws
//! from the ChaCha20 keystream under that seed (the construction of `rand_chacha`), computed by the
//! crate's `KeystreamApplier` kernels. A fresh seed is read for every message that may need
//! randomness, so the output never runs long under one seed.

use core::convert::Infallible;

use gap_rust_cipher_s::{CipherId, KeystreamApplier, Sequential};
use zeroize::Zeroize;

use crate::traits::{Entropy, EntropyError};

/// ChaCha20 keystream under a 32-byte seed, nonce `le32(boot counter) ‖ 0`.
pub struct DrbgRng {
    key: [u8; 32],
    nonce: [u8; 12],
    offset: u64,
}

impl DrbgRng {
    /// Seeds from the entropy source (boot counter 0).
    pub fn from_entropy<E: Entropy + ?Sized>(e: &mut E) -> Result<Self, EntropyError> {
        Self::from_entropy_at_boot(e, 0)
    }

    /// Seeds from the entropy source and mixes in the drone's boot counter (the ChaCha20 nonce):
    /// two boots whose entropy repeats still draw different numbers.
    pub fn from_entropy_at_boot<E: Entropy + ?Sized>(
        e: &mut E,
        boot: u32,
    ) -> Result<Self, EntropyError> {
        let mut key = [0u8; 32];
        e.fill(&mut key)?;
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&boot.to_le_bytes());
        Ok(DrbgRng {
            key,
            nonce,
            offset: 0,
        })
    }
}

impl Drop for DrbgRng {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl rand_core::TryRng for DrbgRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.fill(0);
        // The keystream position stays far below ChaCha20's 256 GiB limit: each generator serves
        // one handshake message (a few hundred bytes). Should it ever be reached, re-key from the
        // last output block rather than repeat or panic.
        if Sequential
            .apply_keystream(CipherId::ChaCha20, &self.key, &self.nonce, self.offset, dst)
            .is_err()
        {
            let mut next = [0u8; 32];
            let _ =
                Sequential.apply_keystream(CipherId::ChaCha20, &self.key, &[1; 12], 0, &mut next);
            self.key = next;
            next.zeroize();
            self.offset = 0;
            let _ = Sequential.apply_keystream(CipherId::ChaCha20, &self.key, &self.nonce, 0, dst);
        }
        self.offset += dst.len() as u64;
        Ok(())
    }
}

impl rand_core::TryCryptoRng for DrbgRng {}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::Rng;

    struct Fixed(u8);
    impl Entropy for Fixed {
        fn fill(&mut self, d: &mut [u8]) -> Result<(), EntropyError> {
            d.fill(self.0);
            Ok(())
        }
    }
    struct Broken;
    impl Entropy for Broken {
        fn fill(&mut self, _: &mut [u8]) -> Result<(), EntropyError> {
            Err(EntropyError)
        }
    }

    #[test]
    fn output_is_the_chacha20_keystream_under_the_seed() {
        let mut r = DrbgRng::from_entropy(&mut Fixed(7)).unwrap();
        let mut a = [0u8; 100];
        r.fill_bytes(&mut a[..37]);
        r.fill_bytes(&mut a[37..]);
        let mut want = [0u8; 100];
        use chacha20::cipher::{KeyIvInit, StreamCipher};
        chacha20::ChaCha20::new(&[7u8; 32].into(), &[0u8; 12].into()).apply_keystream(&mut want);
        assert_eq!(a, want);
        assert!(DrbgRng::from_entropy(&mut Broken).is_err());
    }

    #[test]
    fn the_boot_counter_changes_the_stream_for_the_same_entropy() {
        let draw = |boot| {
            let mut r = DrbgRng::from_entropy_at_boot(&mut Fixed(7), boot).unwrap();
            let mut a = [0u8; 32];
            r.fill_bytes(&mut a);
            a
        };
        assert_ne!(draw(1), draw(2));
        assert_eq!(draw(3), draw(3));
    }
}
