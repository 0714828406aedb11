//! Payload protection for every [`Suite`], on top of [`KeystreamApplier`].
//!
//! The keystream (the expensive part, parallel on the GAP8 cluster) always comes from the
//! `KeystreamApplier` the caller passes in; the MACs run on the calling core with RustCrypto's
//! `poly1305` and `ghash`.
//!
//! * ChaCha20-Poly1305, RFC 8439 §2.8: the Poly1305 one-time key is the first 32 bytes of ChaCha20
//!   block 0 (keystream offset 0), the payload is encrypted from block 1 (offset 64), the MAC covers
//!   `aad ‖ pad16 ‖ ciphertext ‖ pad16 ‖ le64(len aad) ‖ le64(len ciphertext)`.
//! * AES-128-GCM, NIST SP 800-38D with a 96-bit nonce: `H = E_K(0^128)` is the AES-CTR keystream
//!   of the all-zero block (computed once per key, [`PayloadKey::new`]), `J0 = nonce ‖ 00000001`,
//!   the tag mask `E_K(J0)` is the keystream at offset 0 from `J0` and the payload is encrypted from
//!   offset 16 (`inc32(J0)`). The applier increments the counter block as one 128-bit integer,
//!   which equals GCM's `inc32` as long as the low 32 bits do not wrap: payloads are therefore
//!   limited to `2^32 - 2` blocks ([`Suite::max_payload`]), checked here.
//! * The unauthenticated suites XOR the keystream from offset 0 (ChaCha20: the nonce; AES-CTR: the
//!   counter block `nonce ‖ 00000000`) and produce no tag. `None` leaves the payload alone.
//!
//! Opening verifies the tag (in constant time) before anything is decrypted; on failure the buffer
//! is left as it was.

use gap_rust_cipher_s::{CipherId, KeystreamApplier, KeystreamError};
use ghash::GHash;
use poly1305::Poly1305;
use poly1305::universal_hash::{KeyInit, UniversalHash};
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::suite::Suite;

/// Nonce length of every suite (96 bits).
pub const NONCE_LEN: usize = 12;
/// Tag length of the authenticated suites.
pub const TAG_LEN: usize = 16;

/// Why sealing or opening failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CryptoError {
    /// The keystream applier failed (wrong key/IV length, counter range, engine failure).
    Keystream(KeystreamError),
    /// The payload is longer than the suite can protect under one nonce.
    PayloadTooLong,
    /// The key has the wrong length for the suite.
    KeyLength,
    /// The tag did not verify: the header, payload or tag were altered, or the key is wrong.
    BadTag,
    /// A sequence number would wrap: no further message can get a fresh nonce under this key.
    SequenceExhausted,
}

impl From<KeystreamError> for CryptoError {
    fn from(e: KeystreamError) -> Self {
        CryptoError::Keystream(e)
    }
}

impl core::fmt::Display for CryptoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CryptoError::Keystream(e) => write!(f, "keystream: {e}"),
            CryptoError::PayloadTooLong => {
                f.write_str("payload too long for one nonce of this suite")
            }
            CryptoError::KeyLength => f.write_str("wrong key length for the suite"),
            CryptoError::BadTag => f.write_str("authentication tag mismatch"),
            CryptoError::SequenceExhausted => {
                f.write_str("sequence numbers exhausted: handshake again")
            }
        }
    }
}

impl core::error::Error for CryptoError {}

/// A suite with its key (and, for GCM, the precomputed hash key `H`). Wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct PayloadKey {
    #[zeroize(skip)]
    suite: Suite,
    key: [u8; 32],
    ghash_h: [u8; 16],
}

impl core::fmt::Debug for PayloadKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PayloadKey")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

impl PayloadKey {
    /// `key` must be [`Suite::key_len`] bytes (empty for `None`). For GCM this computes `H` through
    /// the applier.
    pub fn new<K: KeystreamApplier + ?Sized>(
        k: &mut K,
        suite: Suite,
        key: &[u8],
    ) -> Result<Self, CryptoError> {
        if key.len() != suite.key_len() {
            return Err(CryptoError::KeyLength);
        }
        let mut pk = PayloadKey {
            suite,
            key: [0; 32],
            ghash_h: [0; 16],
        };
        pk.key[..key.len()].copy_from_slice(key);
        if suite == Suite::Aes128Gcm {
            let mut h = [0u8; 16];
            k.apply_keystream(CipherId::Aes128Ctr, key, &[0u8; 16], 0, &mut h)?;
            pk.ghash_h = h;
            h.zeroize();
        }
        Ok(pk)
    }

    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// The key bytes (for the optional key log).
    pub fn key(&self) -> &[u8] {
        &self.key[..self.suite.key_len()]
    }

    /// Encrypts `data` in place and returns the tag (all zero and meaningless for unauthenticated
    /// suites, whose tag length is 0).
    pub fn seal<K: KeystreamApplier + ?Sized>(
        &self,
        k: &mut K,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        data: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        if data.len() as u64 > self.suite.max_payload() {
            return Err(CryptoError::PayloadTooLong);
        }
        match self.suite {
            Suite::None => Ok([0; TAG_LEN]),
            Suite::ChaCha20Unauthenticated => {
                k.apply_keystream(CipherId::ChaCha20, self.key(), nonce, 0, data)?;
                Ok([0; TAG_LEN])
            }
            Suite::Aes128CtrUnauthenticated => {
                k.apply_keystream(
                    CipherId::Aes128Ctr,
                    self.key(),
                    &ctr_block(nonce, 0),
                    0,
                    data,
                )?;
                Ok([0; TAG_LEN])
            }
            Suite::ChaCha20Poly1305 => {
                let mut mac = self.poly1305(k, nonce)?;
                k.apply_keystream(CipherId::ChaCha20, self.key(), nonce, 64, data)?;
                Ok(poly1305_finish(&mut mac, aad, data))
            }
            Suite::Aes128Gcm => {
                let mask = self.gcm_mask(k, nonce)?;
                k.apply_keystream(
                    CipherId::Aes128Ctr,
                    self.key(),
                    &ctr_block(nonce, 1),
                    16,
                    data,
                )?;
                Ok(self.gcm_tag(&mask, aad, data))
            }
        }
    }

    /// Verifies `tag` over `aad` and the ciphertext in `data`, then decrypts `data` in place.
    /// `tag` must be [`Suite::tag_len`] bytes. On error `data` is unchanged.
    pub fn open<K: KeystreamApplier + ?Sized>(
        &self,
        k: &mut K,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        data: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        if data.len() as u64 > self.suite.max_payload() {
            return Err(CryptoError::PayloadTooLong);
        }
        if tag.len() != self.suite.tag_len() {
            return Err(CryptoError::BadTag);
        }
        match self.suite {
            Suite::None | Suite::ChaCha20Unauthenticated | Suite::Aes128CtrUnauthenticated => {
                // XOR stream: opening is sealing.
                self.seal(k, nonce, aad, data).map(|_| ())
            }
            Suite::ChaCha20Poly1305 => {
                let mut mac = self.poly1305(k, nonce)?;
                let mut want = poly1305_finish(&mut mac, aad, data);
                let ok: bool = want.ct_eq(tag).into();
                want.zeroize();
                if !ok {
                    return Err(CryptoError::BadTag);
                }
                k.apply_keystream(CipherId::ChaCha20, self.key(), nonce, 64, data)?;
                Ok(())
            }
            Suite::Aes128Gcm => {
                let mask = self.gcm_mask(k, nonce)?;
                let mut want = self.gcm_tag(&mask, aad, data);
                let ok: bool = want.ct_eq(tag).into();
                want.zeroize();
                if !ok {
                    return Err(CryptoError::BadTag);
                }
                k.apply_keystream(
                    CipherId::Aes128Ctr,
                    self.key(),
                    &ctr_block(nonce, 1),
                    16,
                    data,
                )?;
                Ok(())
            }
        }
    }

    fn poly1305<K: KeystreamApplier + ?Sized>(
        &self,
        k: &mut K,
        nonce: &[u8; 12],
    ) -> Result<Poly1305, CryptoError> {
        let mut otk = [0u8; 32];
        k.apply_keystream(CipherId::ChaCha20, self.key(), nonce, 0, &mut otk)?;
        let mac = Poly1305::new(&otk.into());
        otk.zeroize();
        Ok(mac)
    }

    /// GCM's tag mask `E_K(J0)`: secret until the tag is out (with it, `GHASH` of a frame
    /// gives the tag), so wiped on drop.
    fn gcm_mask<K: KeystreamApplier + ?Sized>(
        &self,
        k: &mut K,
        nonce: &[u8; 12],
    ) -> Result<Zeroizing<[u8; 16]>, CryptoError> {
        let mut mask = Zeroizing::new([0u8; 16]);
        k.apply_keystream(
            CipherId::Aes128Ctr,
            self.key(),
            &ctr_block(nonce, 1),
            0,
            &mut mask[..],
        )?;
        Ok(mask)
    }

    fn gcm_tag(&self, mask: &[u8; 16], aad: &[u8], ct: &[u8]) -> [u8; 16] {
        let mut g = GHash::new(&self.ghash_h.into());
        g.update_padded(aad);
        g.update_padded(ct);
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((aad.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((ct.len() as u64) * 8).to_be_bytes());
        g.update(&[lens.into()]);
        let mut s: [u8; 16] = g.finalize().into();
        let mut t = [0u8; 16];
        for i in 0..16 {
            t[i] = s[i] ^ mask[i];
        }
        s.zeroize();
        t
    }
}

/// `nonce ‖ be32(counter)`: GCM's `J0` for counter 1, the unauthenticated AES-CTR suite's first
/// block for counter 0.
fn ctr_block(nonce: &[u8; 12], counter: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..12].copy_from_slice(nonce);
    b[12..].copy_from_slice(&counter.to_be_bytes());
    b
}

fn poly1305_finish(mac: &mut Poly1305, aad: &[u8], ct: &[u8]) -> [u8; 16] {
    mac.update_padded(aad);
    mac.update_padded(ct);
    let mut lens = [0u8; 16];
    lens[..8].copy_from_slice(&(aad.len() as u64).to_le_bytes());
    lens[8..].copy_from_slice(&(ct.len() as u64).to_le_bytes());
    mac.update(&[lens.into()]);
    mac.clone().finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;
    use aes_gcm::aead::AeadInOut;
    use alloc::vec::Vec;
    use gap_rust_cipher_s::Sequential;
    use proptest::prelude::*;

    /// RFC 8439 §2.8.2, the AEAD_CHACHA20_POLY1305 example.
    /// Finding 6: `poly1305`, `ghash`, `aes` and `chacha20` were built without their `zeroize`
    /// features (their states stayed in memory after use), and GCM's tag mask `E_K(J0)` and the
    /// copies of group secrets in GROUP_KEY bodies were not wiped. `aes` and the mask are checked
    /// by type (they must be `ZeroizeOnDrop`); `poly1305` and `ghash` wipe in `Drop` without a
    /// marker trait, so for them (and `chacha20`) the workspace manifest is checked.
    #[test]
    fn finding6_cipher_and_mac_states_are_wiped() {
        fn wiped<T: ZeroizeOnDrop>(_: &T) {}
        fn wiped_type<T: ZeroizeOnDrop>() {}
        wiped_type::<aes::Aes128>();
        wiped_type::<crate::wire::GroupKeyBody>();
        let k = PayloadKey::new(&mut Sequential, Suite::Aes128Gcm, &[7; 16]).unwrap();
        let mask = k.gcm_mask(&mut Sequential, &[1; 12]).unwrap();
        wiped(&mask);
        let body = crate::wire::GroupKeyBody {
            epoch: 1,
            first_sequence: 2,
            secret: crate::keys::GroupSecret::from_bytes([3; 32]),
        };
        wiped(&body.encode());
        let manifest = include_str!("../../Cargo.toml");
        for dep in ["chacha20", "aes", "poly1305", "ghash"] {
            let line = manifest
                .lines()
                .find(|l| l.starts_with(&alloc::format!("{dep} = ")))
                .unwrap();
            assert!(line.contains("\"zeroize\""), "{line}");
        }
    }

    #[test]
    fn rfc8439_2_8_2() {
        let key = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        let nonce: [u8; 12] = hex("070000004041424344454647").try_into().unwrap();
        let aad = hex("50515253c0c1c2c3c4c5c6c7");
        let pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let ct = hex(
            "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b\
             1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
             3ff4def08e4b7a9de576d26586cec64b6116",
        );
        let tag = hex("1ae10b594f09e26a7e902ecbd0600691");
        let mut s = Sequential;
        let k = PayloadKey::new(&mut s, Suite::ChaCha20Poly1305, &key).unwrap();
        let mut buf = pt.to_vec();
        let t = k.seal(&mut s, &nonce, &aad, &mut buf).unwrap();
        assert_eq!(buf, ct);
        assert_eq!(t.to_vec(), tag);
        k.open(&mut s, &nonce, &aad, &mut buf, &t).unwrap();
        assert_eq!(buf, pt);
    }

    /// The GCM specification's (McGrew & Viega) Test Case 4 (NIST CAVP style): AES-128, 96-bit IV,
    /// 20 bytes of AAD, 60 bytes of plaintext.
    #[test]
    fn gcm_spec_test_case_4() {
        let key = hex("feffe9928665731c6d6a8f9467308308");
        let nonce: [u8; 12] = hex("cafebabefacedbaddecaf888").try_into().unwrap();
        let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
        let pt = hex(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525\
             b16aedf5aa0de657ba637b39",
        );
        let ct = hex(
            "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa05\
             1ba30b396a0aac973d58e091",
        );
        let tag = hex("5bc94fbc3221a5db94fae95ae7121a47");
        let mut s = Sequential;
        let k = PayloadKey::new(&mut s, Suite::Aes128Gcm, &key).unwrap();
        let mut buf = pt.clone();
        let t = k.seal(&mut s, &nonce, &aad, &mut buf).unwrap();
        assert_eq!(buf, ct);
        assert_eq!(t.to_vec(), tag);
        k.open(&mut s, &nonce, &aad, &mut buf, &t).unwrap();
        assert_eq!(buf, pt);
    }

    #[test]
    fn open_rejects_every_flipped_bit_position_and_leaves_buffer() {
        let mut s = Sequential;
        for suite in Suite::AUTHENTICATED {
            let k = PayloadKey::new(&mut s, suite, &[7u8; 32][..suite.key_len()]).unwrap();
            let nonce = [3u8; 12];
            let aad = [9u8; 36];
            let mut ct = (0..100u8).collect::<Vec<_>>();
            let tag = k.seal(&mut s, &nonce, &aad, &mut ct).unwrap();
            for i in 0..aad.len() + ct.len() + 16 {
                let (mut a, mut c, mut t) = (aad, ct.clone(), tag);
                match i {
                    i if i < 36 => a[i] ^= 0x01,
                    i if i < 136 => c[i - 36] ^= 0x80,
                    i => t[i - 136] ^= 0x10,
                }
                let before = c.clone();
                assert_eq!(
                    k.open(&mut s, &nonce, &a, &mut c, &t),
                    Err(CryptoError::BadTag),
                    "{suite} byte {i}"
                );
                assert_eq!(c, before);
            }
            // Wrong nonce, truncated tag.
            let mut c = ct.clone();
            assert_eq!(
                k.open(&mut s, &[4; 12], &aad, &mut c, &tag),
                Err(CryptoError::BadTag)
            );
            assert_eq!(
                k.open(&mut s, &nonce, &aad, &mut c, &tag[..15]),
                Err(CryptoError::BadTag)
            );
        }
    }

    #[test]
    fn key_length_checked() {
        let mut s = Sequential;
        assert_eq!(
            PayloadKey::new(&mut s, Suite::Aes128Gcm, &[0; 32]).unwrap_err(),
            CryptoError::KeyLength
        );
        assert!(PayloadKey::new(&mut s, Suite::None, &[]).is_ok());
    }

    proptest! {
        /// Byte-for-byte against the RustCrypto AEAD crates, any key, nonce, AAD and length.
        #[test]
        fn matches_reference_crates(key in any::<[u8; 32]>(), nonce in any::<[u8; 12]>(),
                                    aad in proptest::collection::vec(any::<u8>(), 0..80),
                                    pt in proptest::collection::vec(any::<u8>(), 0..700)) {
            let mut s = Sequential;
            // ChaCha20-Poly1305
            let k = PayloadKey::new(&mut s, Suite::ChaCha20Poly1305, &key).unwrap();
            let mut ours = pt.clone();
            let tag = k.seal(&mut s, &nonce, &aad, &mut ours).unwrap();
            let r = chacha20poly1305::ChaCha20Poly1305::new(&key.into());
            let mut theirs = pt.clone();
            let rtag = r.encrypt_inout_detached(&nonce.into(), &aad, theirs.as_mut_slice().into()).unwrap();
            prop_assert_eq!(&ours, &theirs);
            prop_assert_eq!(&tag[..], &rtag[..]);
            // AES-128-GCM
            let k = PayloadKey::new(&mut s, Suite::Aes128Gcm, &key[..16]).unwrap();
            let mut ours = pt.clone();
            let tag = k.seal(&mut s, &nonce, &aad, &mut ours).unwrap();
            let key16: [u8; 16] = key[..16].try_into().unwrap();
            let r = aes_gcm::Aes128Gcm::new(&key16.into());
            let mut theirs = pt.clone();
            let rtag = r.encrypt_inout_detached(&nonce.into(), &aad, theirs.as_mut_slice().into()).unwrap();
            prop_assert_eq!(&ours, &theirs);
            prop_assert_eq!(&tag[..], &rtag[..]);
            // Unauthenticated suites round-trip and actually change the bytes (when long enough).
            for suite in [Suite::ChaCha20Unauthenticated, Suite::Aes128CtrUnauthenticated] {
                let k = PayloadKey::new(&mut s, suite, &key[..suite.key_len()]).unwrap();
                let mut buf = pt.clone();
                k.seal(&mut s, &nonce, &aad, &mut buf).unwrap();
                if pt.len() >= 16 { prop_assert_ne!(&buf, &pt); }
                k.open(&mut s, &nonce, &aad, &mut buf, &[]).unwrap();
                prop_assert_eq!(&buf, &pt);
            }
        }
    }

    #[test]
    fn unauthenticated_suites_match_reference_streams() {
        use aes::cipher::{KeyIvInit, StreamCipher};
        let key = [0x42u8; 32];
        let nonce = [0x24u8; 12];
        let mut s = Sequential;
        let pt = [0u8; 200];
        let k = PayloadKey::new(&mut s, Suite::ChaCha20Unauthenticated, &key).unwrap();
        let mut ours = pt;
        k.seal(&mut s, &nonce, &[], &mut ours).unwrap();
        let mut theirs = pt;
        chacha20::ChaCha20::new(&key.into(), &nonce.into()).apply_keystream(&mut theirs);
        assert_eq!(ours, theirs);
        let k = PayloadKey::new(&mut s, Suite::Aes128CtrUnauthenticated, &key[..16]).unwrap();
        let mut ours = pt;
        k.seal(&mut s, &nonce, &[], &mut ours).unwrap();
        let mut theirs = pt;
        let k16: [u8; 16] = key[..16].try_into().unwrap();
        ctr::Ctr128BE::<aes::Aes128>::new(&k16.into(), &ctr_block(&nonce, 0).into())
            .apply_keystream(&mut theirs);
        assert_eq!(ours, theirs);
    }
}
