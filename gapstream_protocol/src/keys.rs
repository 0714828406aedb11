//! Key schedule: from the handshake's output to per-epoch keys, the epoch ratchet, and key-log lines.
//!
//! ```text
//! PRK        = HKDF-Extract(salt = h, IKM = k1 ‖ k2 ‖ kex_secret)         (SHA-256)
//! S_0        = HKDF-Expand(PRK, "gapstream v1 epoch 0", 32)
//! S_(n+1)    = HKDF-Expand(S_n, "gapstream v1 next epoch", 32)   then S_n is wiped
//! frame key  = HKDF-Expand(S_n, "gapstream v1 d2r frame key" ‖ suite, key length of the suite)
//! frame iv   = HKDF-Expand(S_n, "gapstream v1 d2r frame iv", 12)
//! d2r/r2d control key, iv = HKDF-Expand(S_n, "gapstream v1 d2r control key" / "... iv", 32 / 12), same for r2d
//! ```
//!
//! `h` is the Noise handshake hash (it covers the whole transcript: both static-key identities by
//! the KK pattern, both ephemerals, the offer and the choice), `k1, k2` are Noise's `Split()`
//! outputs, `kex_secret` is the P-256 shared secret or the RSA-transported secret (empty for
//! X25519 alone). Nonces are `iv XOR be64(sequence)`, and a key never outlives its epoch.

use gap_rust_cipher_s::KeystreamApplier;
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::aead::{CryptoError, NONCE_LEN, PayloadKey};
use crate::suite::Suite;

const LABEL_EPOCH0: &[u8] = b"gapstream v1 epoch 0";
const LABEL_NEXT: &[u8] = b"gapstream v1 next epoch";
const LABEL_FRAME_KEY: &[u8] = b"gapstream v1 d2r frame key";
const LABEL_FRAME_IV: &[u8] = b"gapstream v1 d2r frame iv";
const LABEL_D2R_CTRL_KEY: &[u8] = b"gapstream v1 d2r control key";
const LABEL_D2R_CTRL_IV: &[u8] = b"gapstream v1 d2r control iv";
const LABEL_R2D_CTRL_KEY: &[u8] = b"gapstream v1 r2d control key";
const LABEL_R2D_CTRL_IV: &[u8] = b"gapstream v1 r2d control iv";

/// An epoch secret `S_n`. Wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct EpochSecret([u8; 32]);

impl core::fmt::Debug for EpochSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("EpochSecret(..)")
    }
}

fn expand(prk: &[u8; 32], info: &[&[u8]], out: &mut [u8]) {
    // A 32-byte PRK is valid for HKDF-SHA256 and the outputs here are far below 255·32 bytes.
    let hk = Hkdf::<Sha256>::from_prk(prk).expect("32-byte PRK");
    hk.expand_multi_info(info, out).expect("short HKDF output");
}

impl EpochSecret {
    /// `S_0` from the handshake hash, Noise's split keys and the mode's secret.
    pub fn initial(handshake_hash: &[u8], k1: &[u8; 32], k2: &[u8; 32], kex_secret: &[u8]) -> Self {
        let mut ikm = [0u8; 64 + 64];
        ikm[..32].copy_from_slice(k1);
        ikm[32..64].copy_from_slice(k2);
        let n = kex_secret.len().min(64);
        ikm[64..64 + n].copy_from_slice(&kex_secret[..n]);
        let (prk, _) = Hkdf::<Sha256>::extract(Some(handshake_hash), &ikm[..64 + n]);
        ikm.zeroize();
        let mut prk: [u8; 32] = prk.into();
        let mut s = [0u8; 32];
        expand(&prk, &[LABEL_EPOCH0], &mut s);
        prk.zeroize();
        EpochSecret(s)
    }

    /// `S_(n+1)`.
    pub fn next(&self) -> Self {
        let mut s = [0u8; 32];
        expand(&self.0, &[LABEL_NEXT], &mut s);
        EpochSecret(s)
    }

    #[cfg(test)]
    pub(crate) fn from_bytes(b: [u8; 32]) -> Self {
        EpochSecret(b)
    }
    #[cfg(all(test, feature = "alloc"))]
    pub(crate) fn bytes(&self) -> [u8; 32] {
        self.0
    }
}

/// A key and its 12-byte IV for one direction/purpose.
#[derive(Clone, Debug)]
pub struct DirectionKey {
    pub key: PayloadKey,
    pub iv: IvBytes,
}

/// A 12-byte IV, wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop, PartialEq, Eq)]
pub struct IvBytes(pub [u8; NONCE_LEN]);

impl core::fmt::Debug for IvBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IvBytes(..)")
    }
}

impl DirectionKey {
    /// Nonce for `sequence`.
    pub fn nonce(&self, sequence: u64) -> [u8; NONCE_LEN] {
        crate::wire::nonce(&self.iv.0, sequence)
    }
}

/// All keys of one epoch.
#[derive(Clone, Debug)]
pub struct EpochKeys {
    pub epoch: u32,
    /// Frames, drone → receiver, under the negotiated suite.
    pub frame: DirectionKey,
    /// Control messages drone → receiver (ChaCha20-Poly1305).
    pub d2r_control: DirectionKey,
    /// Control messages receiver → drone (ChaCha20-Poly1305).
    pub r2d_control: DirectionKey,
}

impl EpochKeys {
    /// Derives the keys of epoch `epoch` from `S_epoch`. (GCM's hash key is computed through `k`.)
    pub fn derive<K: KeystreamApplier + ?Sized>(
        k: &mut K,
        secret: &EpochSecret,
        epoch: u32,
        suite: Suite,
    ) -> Result<Self, CryptoError> {
        let dir = |k: &mut K,
                   suite: Suite,
                   key_label: &[&[u8]],
                   iv_label: &[u8]|
         -> Result<DirectionKey, CryptoError> {
            let mut key = [0u8; 32];
            let kl = suite.key_len();
            expand(&secret.0, key_label, &mut key[..kl]);
            let pk = PayloadKey::new(k, suite, &key[..kl]);
            key.zeroize();
            let mut iv = IvBytes([0; NONCE_LEN]);
            expand(&secret.0, &[iv_label], &mut iv.0);
            Ok(DirectionKey { key: pk?, iv })
        };
        let ctrl = Suite::ChaCha20Poly1305;
        Ok(EpochKeys {
            epoch,
            frame: dir(k, suite, &[LABEL_FRAME_KEY, &[suite as u8]], LABEL_FRAME_IV)?,
            d2r_control: dir(k, ctrl, &[LABEL_D2R_CTRL_KEY], LABEL_D2R_CTRL_IV)?,
            r2d_control: dir(k, ctrl, &[LABEL_R2D_CTRL_KEY], LABEL_R2D_CTRL_IV)?,
        })
    }
}

/// One key-log line (one per epoch), in the spirit of TLS's `SSLKEYLOGFILE`:
///
/// ```text
/// GAPSTREAM_KEYLOG_V1 <hello id, 16 hex> <epoch> <suite> <frame key> <frame iv> <d2r ctrl key> <d2r ctrl iv> <r2d ctrl key> <r2d ctrl iv>
/// ```
///
/// The hello id appears in clear in the HELLO and ACCEPT headers of a capture, so a tool can match
/// lines to sessions; with the frame key and IV any ChaCha20-Poly1305 / AES-GCM implementation
/// opens a frame (nonce = iv XOR be64(sequence), associated data = the 36-byte header).
/// A debugging aid: anyone holding the file can read the stream. Off unless configured.
#[derive(Clone)]
pub struct KeyLogLine {
    pub hello_id: [u8; 8],
    pub suite: Suite,
    pub keys: EpochKeys,
}

impl core::fmt::Debug for KeyLogLine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyLogLine")
            .field("epoch", &self.keys.epoch)
            .finish_non_exhaustive()
    }
}

struct Hex<'a>(&'a [u8]);
impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("-");
        }
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl core::fmt::Display for KeyLogLine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let k = &self.keys;
        write!(
            f,
            "GAPSTREAM_KEYLOG_V1 {} {} {} {} {} {} {} {} {}",
            Hex(&self.hello_id),
            k.epoch,
            self.suite.name(),
            Hex(k.frame.key.key()),
            Hex(&k.frame.iv.0),
            Hex(k.d2r_control.key.key()),
            Hex(&k.d2r_control.iv.0),
            Hex(k.r2d_control.key.key()),
            Hex(&k.r2d_control.iv.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;
    use gap_rust_cipher_s::Sequential;
    use sha2::Digest;

    /// The schedule recomputed with `hmac` directly (RFC 5869 by hand), independent of `hkdf`.
    #[test]
    fn schedule_matches_rfc5869_by_hand() {
        use hmac::{KeyInit, Mac};
        type HmacSha256 = hmac::Hmac<Sha256>;
        let hmac = |k: &[u8], parts: &[&[u8]]| -> [u8; 32] {
            let mut m = <HmacSha256 as KeyInit>::new_from_slice(k).unwrap();
            for p in parts {
                m.update(p);
            }
            m.finalize().into_bytes().into()
        };
        let h = sha2::Sha256::digest(b"transcript");
        let (k1, k2, kex) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        let mut ikm = [0u8; 96];
        ikm[..32].copy_from_slice(&k1);
        ikm[32..64].copy_from_slice(&k2);
        ikm[64..].copy_from_slice(&kex);
        let prk = hmac(&h, &[&ikm]);
        let s0 = hmac(&prk, &[b"gapstream v1 epoch 0", &[1]]);
        let s1 = hmac(&s0, &[b"gapstream v1 next epoch", &[1]]);
        let fk = hmac(&s1, &[b"gapstream v1 d2r frame key", &[0x11], &[1]]);
        let ours0 = EpochSecret::initial(&h, &k1, &k2, &kex);
        assert_eq!(ours0.0, s0);
        let ours1 = ours0.next();
        assert_eq!(ours1.0, s1);
        let keys = EpochKeys::derive(&mut Sequential, &ours1, 1, Suite::ChaCha20Poly1305).unwrap();
        assert_eq!(keys.frame.key.key(), &fk);
        let gcm = EpochKeys::derive(&mut Sequential, &ours1, 1, Suite::Aes128Gcm).unwrap();
        assert_eq!(
            gcm.frame.key.key(),
            &hmac(&s1, &[b"gapstream v1 d2r frame key", &[0x12], &[1]])[..16]
        );
        // Different purposes never share a key.
        assert_ne!(keys.frame.key.key(), keys.d2r_control.key.key());
        assert_ne!(keys.d2r_control.key.key(), keys.r2d_control.key.key());
        assert_ne!(keys.frame.iv, keys.d2r_control.iv);
    }

    #[test]
    fn keylog_line_format() {
        let s = EpochSecret::from_bytes([9; 32]);
        let keys = EpochKeys::derive(&mut Sequential, &s, 7, Suite::None).unwrap();
        let line = alloc::format!(
            "{}",
            KeyLogLine {
                hello_id: [0xAB; 8],
                suite: Suite::None,
                keys
            }
        );
        let f: alloc::vec::Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 10);
        assert_eq!(f[0], "GAPSTREAM_KEYLOG_V1");
        assert_eq!(f[1], "abababababababab");
        assert_eq!(f[2], "7");
        assert_eq!(f[3], "none");
        assert_eq!(f[4], "-");
        assert_eq!(hex(f[5]).len(), 12);
        assert_eq!(hex(f[6]).len(), 32);
    }
}
