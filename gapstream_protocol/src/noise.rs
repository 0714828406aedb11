//! `snow` crypto resolver for `Noise_KK_25519_ChaChaPoly_SHA256` built on crates that compile for
//! `riscv32imc-unknown-none-elf` (snow's default resolver needs `getrandom`):
//!
//! * 25519: `curve25519-dalek`'s `MontgomeryPoint::mul_clamped` (RFC 7748 X25519); an all-zero
//!   shared secret (a low-order peer point) is refused.
//! * ChaChaPoly: this crate's RFC 8439 AEAD ([`crate::aead`]) over the single-core
//!   `gap_rust_cipher_s::Sequential` keystream, Noise nonce `0^32 ‖ le64(n)`.
//! * SHA256: `sha2`.
//! * Randomness: a ChaCha20 keystream (key = 32 bytes drawn from the caller's `CryptoRng` when the
//!   handshake object is built, nonce 0) — snow asks for it only to make the ephemeral key.
//!
//! The resolver is checked against the cacophony test vector for this exact protocol name.

use alloc::boxed::Box;

use curve25519_dalek::montgomery::MontgomeryPoint;
use gap_rust_cipher_s::{CipherId, KeystreamApplier, Sequential};
use sha2::Digest;
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::CryptoResolver;
use snow::types::{Cipher, Dh, Hash, Random};
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::aead::PayloadKey;
use crate::suite::Suite;

/// The Noise protocol gapstream runs.
pub const PROTOCOL_NAME: &str = "Noise_KK_25519_ChaChaPoly_SHA256";

/// X25519 public key of a secret key (RFC 7748, clamped).
pub fn x25519_public(secret: &[u8; 32]) -> [u8; 32] {
    MontgomeryPoint::mul_base_clamped(*secret).to_bytes()
}

/// X25519(secret, public) (RFC 7748, clamped): the Diffie-Hellman value of two static keys.
pub fn x25519(secret: &[u8; 32], public: &[u8; 32]) -> [u8; 32] {
    MontgomeryPoint(*public).mul_clamped(*secret).to_bytes()
}

/// Resolver handing snow our primitives.
pub struct Resolver {
    seed: [u8; 32],
}

impl core::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Resolver(..)")
    }
}

impl Resolver {
    /// `seed` keys the ChaCha20 generator snow draws its ephemeral key from.
    pub fn new(seed: [u8; 32]) -> Self {
        Resolver { seed }
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        self.seed.zeroize();
    }
}

impl CryptoResolver for Resolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(ChaChaRng {
            key: self.seed,
            offset: 0,
        }))
    }
    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        matches!(choice, DHChoice::Curve25519).then(|| Box::new(X25519::default()) as Box<dyn Dh>)
    }
    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        matches!(choice, HashChoice::SHA256).then(|| Box::new(Sha256::default()) as Box<dyn Hash>)
    }
    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        matches!(choice, CipherChoice::ChaChaPoly)
            .then(|| Box::new(ChaChaPoly { key: [0; 32] }) as Box<dyn Cipher>)
    }
}

#[derive(Zeroize, ZeroizeOnDrop)]
struct ChaChaRng {
    key: [u8; 32],
    offset: u64,
}

impl Random for ChaChaRng {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        dest.fill(0);
        Sequential
            .apply_keystream(CipherId::ChaCha20, &self.key, &[0; 12], self.offset, dest)
            .map_err(|_| snow::Error::Rng)?;
        self.offset += dest.len() as u64;
        Ok(())
    }
}

#[derive(Default, Zeroize, ZeroizeOnDrop)]
struct X25519 {
    secret: [u8; 32],
    public: [u8; 32],
}

impl Dh for X25519 {
    fn name(&self) -> &'static str {
        "25519"
    }
    fn pub_len(&self) -> usize {
        32
    }
    fn priv_len(&self) -> usize {
        32
    }
    fn set(&mut self, privkey: &[u8]) {
        let n = privkey.len().min(32);
        self.secret = [0; 32];
        self.secret[..n].copy_from_slice(&privkey[..n]);
        self.public = x25519_public(&self.secret);
    }
    fn generate(&mut self, rng: &mut dyn Random) -> Result<(), snow::Error> {
        let mut s = [0u8; 32];
        rng.try_fill_bytes(&mut s)?;
        self.set(&s);
        s.zeroize();
        Ok(())
    }
    fn pubkey(&self) -> &[u8] {
        &self.public
    }
    fn privkey(&self) -> &[u8] {
        &self.secret
    }
    fn dh(&self, pubkey: &[u8], out: &mut [u8]) -> Result<(), snow::Error> {
        let peer: [u8; 32] = pubkey
            .get(..32)
            .and_then(|p| p.try_into().ok())
            .ok_or(snow::Error::Dh)?;
        let shared = MontgomeryPoint(peer).mul_clamped(self.secret).to_bytes();
        if bool::from(shared.ct_eq(&[0u8; 32])) {
            return Err(snow::Error::Dh);
        }
        out.get_mut(..32)
            .ok_or(snow::Error::Dh)?
            .copy_from_slice(&shared);
        Ok(())
    }
}

#[derive(Default, Clone)]
struct Sha256(sha2::Sha256);

impl Hash for Sha256 {
    fn name(&self) -> &'static str {
        "SHA256"
    }
    fn block_len(&self) -> usize {
        64
    }
    fn hash_len(&self) -> usize {
        32
    }
    fn reset(&mut self) {
        self.0 = sha2::Sha256::new();
    }
    fn input(&mut self, data: &[u8]) {
        self.0.update(data);
    }
    fn result(&mut self, out: &mut [u8]) {
        let h = core::mem::take(&mut self.0).finalize();
        out[..32].copy_from_slice(&h);
    }
}

#[derive(Zeroize, ZeroizeOnDrop)]
struct ChaChaPoly {
    key: [u8; 32],
}

impl ChaChaPoly {
    fn nonce(n: u64) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[4..].copy_from_slice(&n.to_le_bytes());
        b
    }
    fn key(&self) -> PayloadKey {
        // Infallible: the length matches the suite.
        PayloadKey::new(&mut Sequential, Suite::ChaCha20Poly1305, &self.key).expect("32-byte key")
    }
}

impl Cipher for ChaChaPoly {
    fn name(&self) -> &'static str {
        "ChaChaPoly"
    }
    fn set(&mut self, key: &[u8; 32]) {
        self.key = *key;
    }
    fn encrypt(&self, nonce: u64, authtext: &[u8], plaintext: &[u8], out: &mut [u8]) -> usize {
        let n = plaintext.len();
        out[..n].copy_from_slice(plaintext);
        // Sequential never fails for a 32-byte key, 12-byte nonce and a handshake-sized message.
        let tag = self
            .key()
            .seal(
                &mut Sequential,
                &Self::nonce(nonce),
                authtext,
                &mut out[..n],
            )
            .expect("keystream");
        out[n..n + 16].copy_from_slice(&tag);
        n + 16
    }
    fn decrypt(
        &self,
        nonce: u64,
        authtext: &[u8],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, snow::Error> {
        let n = ciphertext
            .len()
            .checked_sub(16)
            .ok_or(snow::Error::Decrypt)?;
        let out = out.get_mut(..n).ok_or(snow::Error::Decrypt)?;
        out.copy_from_slice(&ciphertext[..n]);
        self.key()
            .open(
                &mut Sequential,
                &Self::nonce(nonce),
                authtext,
                out,
                &ciphertext[n..],
            )
            .map_err(|_| snow::Error::Decrypt)?;
        Ok(n)
    }
}

/// A snow builder for [`PROTOCOL_NAME`] with our resolver.
pub(crate) fn builder<'a>(seed: [u8; 32]) -> snow::Builder<'a> {
    // The name is a constant that parses.
    let params: snow::params::NoiseParams =
        PROTOCOL_NAME.parse().expect("valid Noise protocol name");
    snow::Builder::with_resolver(params, Box::new(Resolver::new(seed)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    /// cacophony test vector for Noise_KK_25519_ChaChaPoly_SHA256 (as shipped in snow's
    /// `tests/vectors/cacophony.txt`): the first two messages and the handshake hash.
    #[test]
    fn cacophony_kk_vector() {
        let prologue = hex("4a6f686e2047616c74");
        let init_static = hex("e61ef9919cde45dd5f82166404bd08e38bceb5dfdfded0a34c8df7ed542214d1");
        let init_eph = hex("893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a");
        let resp_static = hex("4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893");
        let resp_eph = hex("bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b");
        let init_remote = hex("31e0303fd6418d2f8c0e78b91f22e8caed0fbe48656dcf4767e4834f701b8f62");
        let resp_remote = hex("6bc3822a2aa7f4e6981d6538692b3cdf3e6df9eea6ed269eb41d93c22757b75a");
        assert_eq!(
            x25519_public(&resp_static.clone().try_into().unwrap()).to_vec(),
            init_remote
        );
        assert_eq!(
            x25519_public(&init_static.clone().try_into().unwrap()).to_vec(),
            resp_remote
        );
        let mut i = builder([1; 32])
            .prologue(&prologue)
            .unwrap()
            .local_private_key(&init_static)
            .unwrap()
            .remote_public_key(&init_remote)
            .unwrap()
            .fixed_ephemeral_key_for_testing_only(&init_eph)
            .build_initiator()
            .unwrap();
        let mut r = builder([2; 32])
            .prologue(&prologue)
            .unwrap()
            .local_private_key(&resp_static)
            .unwrap()
            .remote_public_key(&resp_remote)
            .unwrap()
            .fixed_ephemeral_key_for_testing_only(&resp_eph)
            .build_responder()
            .unwrap();
        let mut m = [0u8; 200];
        let mut p = [0u8; 200];
        let n = i
            .write_message(&hex("4c756477696720766f6e204d69736573"), &mut m)
            .unwrap();
        assert_eq!(
            m[..n].to_vec(),
            hex(
                "ca35def5ae56cec33dc2036731ab14896bc4c75dbb07a61f879f8e3afa4c79440177015efc1fe7a37c629af7120a96274e6ab7afcc9261901d0e09ae32a5bb96"
            )
        );
        let pn = r.read_message(&m[..n], &mut p).unwrap();
        assert_eq!(p[..pn].to_vec(), hex("4c756477696720766f6e204d69736573"));
        let n = r
            .write_message(&hex("4d757272617920526f746862617264"), &mut m)
            .unwrap();
        assert_eq!(
            m[..n].to_vec(),
            hex(
                "95ebc60d2b1fa672c1f46a8aa265ef51bfe38e7ccb39ec5be34069f144808843b274d3429adc47ca093ba63ef90f8da89fda108db471dccfa4894aa7b00003"
            )
        );
        i.read_message(&m[..n], &mut p).unwrap();
        let want = hex("24c6b51ecb76277140ca018b5985bc9f03de321dae2d34dcae433dafef0131d9");
        assert_eq!(i.get_handshake_hash().to_vec(), want);
        assert_eq!(r.get_handshake_hash().to_vec(), want);
        // Transport message 3 (initiator -> responder) from the vector checks the split keys.
        let mut t = i.into_transport_mode().unwrap();
        let n = t
            .write_message(&hex("462e20412e20486179656b"), &mut m)
            .unwrap();
        assert_eq!(
            m[..n].to_vec(),
            hex("966b05bc69ec01b8454d3160a214e6f24a3d884eb31ec2408af63f")
        );
    }

    #[test]
    fn low_order_point_refused() {
        let mut d = X25519::default();
        d.set(&[5; 32]);
        let mut out = [0u8; 32];
        assert!(d.dh(&[0u8; 32], &mut out).is_err());
        let mut one = [0u8; 32];
        one[0] = 1;
        assert!(d.dh(&one, &mut out).is_err());
    }
}
