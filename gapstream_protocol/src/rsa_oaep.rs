//! RSA-OAEP-2048 with SHA-256 (RFC 8017 §7.1, MGF1-SHA-256), for the RSA key-transport mode.
//!
//! The drone only ever *encrypts* (with the receiver's public key, `e = 65537`): [`encrypt`] here,
//! on `crypto-bigint`'s fixed-size `U2048` Montgomery arithmetic, with no allocation. It exists
//! because the `rsa` crate does not build for `riscv32imc-unknown-none-elf` (its `crypto-bigint`
//! `alloc` types use `alloc::sync::Arc`, which needs atomic compare-and-swap). It is checked
//! byte-for-byte against `rsa`'s OAEP encryption with the same seed, and `rsa` decrypts it.
//!
//! The receiver decrypts with the `rsa` crate ([`Decryptor`], on targets with atomics), using
//! blinding.

use crypto_bigint::modular::{FixedMontyForm, FixedMontyParams};
use crypto_bigint::{Odd, U2048};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

/// Modulus / ciphertext length.
pub const MODULUS_LEN: usize = 256;
/// The only public exponent accepted.
pub const PUBLIC_EXPONENT: u32 = 65537;
/// OAEP label binding the ciphertext to this use.
pub const LABEL: &[u8] = b"gapstream v2 rsa-oaep-2048 key transport";
const H: usize = 32;

/// Why an RSA operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RsaError {
    /// The modulus is not a 2048-bit odd number.
    BadModulus,
    /// The message does not fit (at most 256 - 2·32 - 2 = 190 bytes).
    MessageTooLong,
    /// Decryption failed (wrong key or altered ciphertext).
    Decrypt,
    /// The private key is unusable (not 2048 bits, or `e` is not 65537).
    BadKey,
}

impl core::fmt::Display for RsaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RsaError::BadModulus => "RSA modulus is not a 2048-bit odd number",
            RsaError::MessageTooLong => "message too long for RSA-OAEP-2048/SHA-256",
            RsaError::Decrypt => "RSA-OAEP decryption failed",
            RsaError::BadKey => "RSA key must be 2048 bits with e = 65537",
        })
    }
}

impl core::error::Error for RsaError {}

fn mgf1_xor(out: &mut [u8], seed: &[u8]) {
    for (i, chunk) in out.chunks_mut(H).enumerate() {
        let mut d = Sha256::new();
        d.update(seed);
        d.update((i as u32).to_be_bytes());
        let m = d.finalize();
        for (o, x) in chunk.iter_mut().zip(m.iter()) {
            *o ^= x;
        }
    }
}

/// RSA-OAEP-SHA256 encryption of `msg` under the public key `(n, 65537)` with the OAEP `seed`
/// (32 random bytes; the caller draws them from its `CryptoRng`) and [`LABEL`].
pub fn encrypt(
    n: &[u8; MODULUS_LEN],
    msg: &[u8],
    seed: &[u8; H],
) -> Result<[u8; MODULUS_LEN], RsaError> {
    if n[0] & 0x80 == 0 || n[MODULUS_LEN - 1] & 1 == 0 {
        return Err(RsaError::BadModulus);
    }
    if msg.len() > MODULUS_LEN - 2 * H - 2 {
        return Err(RsaError::MessageTooLong);
    }
    // EM = 0x00 ‖ maskedSeed ‖ maskedDB, DB = lHash ‖ PS ‖ 0x01 ‖ M.
    let mut em = [0u8; MODULUS_LEN];
    {
        let (seed_part, db) = em[1..].split_at_mut(H);
        let db_len = db.len();
        db[..H].copy_from_slice(&Sha256::digest(LABEL));
        db[db_len - msg.len() - 1] = 1;
        db[db_len - msg.len()..].copy_from_slice(msg);
        seed_part.copy_from_slice(seed);
        mgf1_xor(db, seed_part);
        mgf1_xor(seed_part, db);
    }
    let modulus = Odd::new(U2048::from_be_slice(n))
        .into_option()
        .ok_or(RsaError::BadModulus)?;
    let params = FixedMontyParams::new_vartime(modulus);
    let mut m = U2048::from_be_slice(&em);
    em.zeroize();
    let c = FixedMontyForm::new(&m, &params)
        .pow_vartime(&U2048::from_u32(PUBLIC_EXPONENT))
        .retrieve();
    m.zeroize();
    let mut out = [0u8; MODULUS_LEN];
    out.copy_from_slice(&c.to_be_bytes());
    Ok(out)
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use decrypt::Decryptor;

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
mod decrypt {
    use super::*;
    use alloc::vec::Vec;
    use rsa::traits::{PrivateKeyParts, PublicKeyParts};
    use rsa::{BoxedUint, Oaep, RsaPrivateKey};

    /// The receiver's RSA-2048 private key, for the RSA key-transport mode.
    #[derive(Clone)]
    pub struct Decryptor {
        key: RsaPrivateKey,
        modulus: [u8; MODULUS_LEN],
    }

    impl core::fmt::Debug for Decryptor {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("Decryptor").finish_non_exhaustive()
        }
    }

    impl Decryptor {
        /// From the two 1024-bit primes (big-endian), `e = 65537` (how pairing stores the key).
        pub fn from_primes(p: &[u8], q: &[u8]) -> Result<Self, RsaError> {
            let p = BoxedUint::from_be_slice_vartime(p);
            let q = BoxedUint::from_be_slice_vartime(q);
            let e = BoxedUint::from(PUBLIC_EXPONENT as u64);
            let key = RsaPrivateKey::from_p_q(p, q, e).map_err(|_| RsaError::BadKey)?;
            Self::new(key)
        }

        /// From an `rsa` private key (2048 bits, `e = 65537`).
        pub fn new(key: RsaPrivateKey) -> Result<Self, RsaError> {
            if key.size() != MODULUS_LEN || key.e() != &BoxedUint::from(PUBLIC_EXPONENT as u64) {
                return Err(RsaError::BadKey);
            }
            let n = key.n().to_be_bytes();
            let mut modulus = [0u8; MODULUS_LEN];
            // `to_be_bytes` is padded to the limb size: take the low 256 bytes.
            let bytes: &[u8] = &n;
            modulus.copy_from_slice(&bytes[bytes.len() - MODULUS_LEN..]);
            Ok(Decryptor { key, modulus })
        }

        /// Generates a fresh key (slow: tens to hundreds of milliseconds on a PC).
        pub fn generate<R: rand_core::CryptoRng + ?Sized>(rng: &mut R) -> Result<Self, RsaError> {
            let key =
                RsaPrivateKey::new_with_exp(rng, 2048, BoxedUint::from(PUBLIC_EXPONENT as u64))
                    .map_err(|_| RsaError::BadKey)?;
            Self::new(key)
        }

        /// The big-endian modulus sent in the HELLO.
        pub fn modulus(&self) -> &[u8; MODULUS_LEN] {
            &self.modulus
        }

        /// The primes `(p, q)`, big-endian, for storing the key.
        pub fn primes(&self) -> (Vec<u8>, Vec<u8>) {
            let pr = self.key.primes();
            (pr[0].to_be_bytes().to_vec(), pr[1].to_be_bytes().to_vec())
        }

        /// OAEP-SHA256 decryption with [`LABEL`], blinded with `rng`.
        pub fn decrypt<R: rand_core::CryptoRng + ?Sized>(
            &self,
            rng: &mut R,
            ciphertext: &[u8],
        ) -> Result<zeroize::Zeroizing<Vec<u8>>, RsaError> {
            if ciphertext.len() != MODULUS_LEN {
                return Err(RsaError::Decrypt);
            }
            self.key
                .decrypt_blinded(rng, Oaep::<Sha256>::new_with_label(LABEL), ciphertext)
                .map(zeroize::Zeroizing::new)
                .map_err(|_| RsaError::Decrypt)
        }

        /// The `rsa` public key (tests, pairing).
        pub fn public_key(&self) -> rsa::RsaPublicKey {
            self.key.to_public_key()
        }
    }
}

#[cfg(all(test, feature = "alloc", target_has_atomic = "ptr"))]
pub(crate) mod tests {
    use super::*;
    use crate::test_util::hex;

    pub(crate) fn test_key() -> Decryptor {
        let (p, q) = test_primes();
        Decryptor::from_primes(&p, &q).unwrap()
    }
    pub(crate) fn test_primes() -> (alloc::vec::Vec<u8>, alloc::vec::Vec<u8>) {
        (
            hex(crate::test_util::RSA_TEST_P),
            hex(crate::test_util::RSA_TEST_Q),
        )
    }

    /// Replays fixed bytes as randomness (so `rsa` uses our seed).
    struct Fixed<'a>(&'a [u8]);
    impl rand_core::TryRng for Fixed<'_> {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            unimplemented!()
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            unimplemented!()
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            let (a, b) = self.0.split_at(dst.len());
            dst.copy_from_slice(a);
            self.0 = b;
            Ok(())
        }
    }
    impl rand_core::TryCryptoRng for Fixed<'_> {}

    #[test]
    fn matches_rsa_crate_and_decrypts() {
        let key = test_key();
        assert_eq!(key.modulus().to_vec(), hex(crate::test_util::RSA_TEST_N));
        let seed = [0x5Au8; 32];
        let msg = [0xC3u8; 32];
        let ours = encrypt(key.modulus(), &msg, &seed).unwrap();
        let theirs = key
            .public_key()
            .encrypt(
                &mut Fixed(&seed),
                Oaep::<Sha256>::new_with_label(LABEL),
                &msg,
            )
            .unwrap();
        assert_eq!(ours.to_vec(), theirs);
        let mut rng = crate::test_util::TestRng::new(1);
        assert_eq!(&key.decrypt(&mut rng, &ours).unwrap()[..], &msg);
        // Any flipped byte makes decryption fail.
        let mut bad = ours;
        bad[100] ^= 1;
        assert_eq!(key.decrypt(&mut rng, &bad).unwrap_err(), RsaError::Decrypt);
    }

    #[test]
    fn rejects_bad_inputs() {
        let mut n = [0xFFu8; 256];
        assert!(encrypt(&n, &[0; 190], &[0; 32]).is_ok());
        assert_eq!(
            encrypt(&n, &[0; 191], &[0; 32]),
            Err(RsaError::MessageTooLong)
        );
        n[255] = 0xFE;
        assert_eq!(encrypt(&n, &[0; 32], &[0; 32]), Err(RsaError::BadModulus));
        n[255] = 0xFF;
        n[0] = 0x7F;
        assert_eq!(encrypt(&n, &[0; 32], &[0; 32]), Err(RsaError::BadModulus));
    }

    use rsa::Oaep;
}
