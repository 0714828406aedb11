//! Key schedule: from a handshake to the session's control keys, the drone's group pool, the
//! per-epoch group frame keys, and key-log lines.
//!
//! ```text
//! per session (drone and that receiver):
//!   PRK   = HKDF-Extract(salt = h, IKM = k1 ‖ k2 ‖ kex_secret)                      (SHA-256)
//!   S     = HKDF-Expand(PRK, "gapstream v2 session", 32)
//!   d2r / r2d control key, iv = HKDF-Expand(S, "gapstream v2 d2r control key" / "... iv", 32 / 12)
//!   C     = HKDF-Expand(S, "gapstream v2 group contribution", 32)
//! drone only, the group pool P (32 zero bytes at start):
//!   each accepted handshake:  P = HKDF-Extract(salt = P, IKM = C)
//!   each new epoch n:         PRK_n = HKDF-Extract(salt = P, IKM = R ‖ le32(n))    R: 32 fresh random bytes
//!                             P     = HKDF-Expand(PRK_n, "gapstream v2 group pool", 32)
//!                             G_n   = HKDF-Expand(PRK_n, "gapstream v2 group epoch secret", 32)
//! every member of epoch n (G_n arrives in a GROUP_KEY control message):
//!   frame key = HKDF-Expand(G_n, "gapstream v2 group frame key" ‖ suite, key length of the suite)
//!   frame iv  = HKDF-Expand(G_n, "gapstream v2 group frame iv", 12)
//! ```
//!
//! `h` is the Noise handshake hash (it covers the whole transcript: both static-key identities by
//! the KK pattern, both ephemerals, the offer and the choice), `k1, k2` are Noise's `Split()`
//! outputs, `kex_secret` is the P-256 shared secret or the RSA-transported secret (empty for
//! X25519 alone). The pool makes every group secret depend on every handshake the drone accepted
//! since it started, so even a drone whose random numbers repeat after a restart draws new group
//! secrets once a receiver with a fresh ephemeral key has joined. Nonces are `iv XOR
//! be64(sequence)`; a group key never outlives its epoch.

use gap_rust_cipher_s::KeystreamApplier;
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::aead::{CryptoError, NONCE_LEN, PayloadKey};
use crate::suite::Suite;

const LABEL_SESSION: &[u8] = b"gapstream v2 session";
const LABEL_D2R_CTRL_KEY: &[u8] = b"gapstream v2 d2r control key";
const LABEL_D2R_CTRL_IV: &[u8] = b"gapstream v2 d2r control iv";
const LABEL_R2D_CTRL_KEY: &[u8] = b"gapstream v2 r2d control key";
const LABEL_R2D_CTRL_IV: &[u8] = b"gapstream v2 r2d control iv";
const LABEL_CONTRIBUTION: &[u8] = b"gapstream v2 group contribution";
const LABEL_POOL: &[u8] = b"gapstream v2 group pool";
const LABEL_GROUP_SECRET: &[u8] = b"gapstream v2 group epoch secret";
const LABEL_FRAME_KEY: &[u8] = b"gapstream v2 group frame key";
const LABEL_FRAME_IV: &[u8] = b"gapstream v2 group frame iv";

fn expand(prk: &[u8; 32], info: &[&[u8]], out: &mut [u8]) {
    // A 32-byte PRK is valid for HKDF-SHA256 and the outputs here are far below 255·32 bytes.
    let hk = Hkdf::<Sha256>::from_prk(prk).expect("32-byte PRK");
    hk.expand_multi_info(info, out).expect("short HKDF output");
}

/// A session's secret `S` (one per handshake). Wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct SessionSecret([u8; 32]);

impl core::fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SessionSecret(..)")
    }
}

impl SessionSecret {
    /// `S` from the handshake hash, Noise's split keys and the mode's secret.
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
        expand(&prk, &[LABEL_SESSION], &mut s);
        prk.zeroize();
        SessionSecret(s)
    }

    /// The session's contribution `C` to the drone's group pool.
    pub fn contribution(&self) -> Contribution {
        let mut c = [0u8; 32];
        expand(&self.0, &[LABEL_CONTRIBUTION], &mut c);
        Contribution(c)
    }

    #[cfg(test)]
    pub(crate) fn from_bytes(b: [u8; 32]) -> Self {
        SessionSecret(b)
    }
    #[cfg(all(test, feature = "alloc"))]
    pub(crate) fn bytes(&self) -> [u8; 32] {
        self.0
    }
}

/// A session's contribution `C` to the group pool. Wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Contribution([u8; 32]);

impl core::fmt::Debug for Contribution {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Contribution(..)")
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

    fn derive<K: KeystreamApplier + ?Sized>(
        k: &mut K,
        secret: &[u8; 32],
        suite: Suite,
        key_label: &[&[u8]],
        iv_label: &[u8],
    ) -> Result<Self, CryptoError> {
        let mut key = [0u8; 32];
        let kl = suite.key_len();
        expand(secret, key_label, &mut key[..kl]);
        let pk = PayloadKey::new(k, suite, &key[..kl]);
        key.zeroize();
        let mut iv = IvBytes([0; NONCE_LEN]);
        expand(secret, &[iv_label], &mut iv.0);
        Ok(DirectionKey { key: pk?, iv })
    }
}

/// A session's control keys (ChaCha20-Poly1305, one per direction), fixed for the session.
#[derive(Clone, Debug)]
pub struct SessionKeys {
    /// Control messages drone → receiver.
    pub d2r_control: DirectionKey,
    /// Control messages receiver → drone.
    pub r2d_control: DirectionKey,
}

impl SessionKeys {
    pub fn derive<K: KeystreamApplier + ?Sized>(
        k: &mut K,
        s: &SessionSecret,
    ) -> Result<Self, CryptoError> {
        let c = Suite::ChaCha20Poly1305;
        Ok(SessionKeys {
            d2r_control: DirectionKey::derive(
                k,
                &s.0,
                c,
                &[LABEL_D2R_CTRL_KEY],
                LABEL_D2R_CTRL_IV,
            )?,
            r2d_control: DirectionKey::derive(
                k,
                &s.0,
                c,
                &[LABEL_R2D_CTRL_KEY],
                LABEL_R2D_CTRL_IV,
            )?,
        })
    }
}

/// A group epoch secret `G_n` (what a GROUP_KEY message carries). Wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct GroupSecret([u8; 32]);

impl core::fmt::Debug for GroupSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("GroupSecret(..)")
    }
}

impl GroupSecret {
    pub const fn from_bytes(b: [u8; 32]) -> Self {
        GroupSecret(b)
    }
    /// Copies a 32-byte slice straight into the secret (no intermediate copy to wipe); `None`
    /// for another length.
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        let mut g = GroupSecret([0; 32]);
        if b.len() != g.0.len() {
            return None;
        }
        g.0.copy_from_slice(b);
        Some(g)
    }
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// The frame key of one group epoch, shared by every member: frames are sealed once.
#[derive(Clone, Debug)]
pub struct GroupKeys {
    pub epoch: u32,
    /// Frames, drone → every member, under the negotiated suite.
    pub frame: DirectionKey,
}

impl GroupKeys {
    /// The frame key and IV of epoch `epoch` from its group secret. (GCM's hash key is computed
    /// through `k`.)
    pub fn derive<K: KeystreamApplier + ?Sized>(
        k: &mut K,
        g: &GroupSecret,
        epoch: u32,
        suite: Suite,
    ) -> Result<Self, CryptoError> {
        Ok(GroupKeys {
            epoch,
            frame: DirectionKey::derive(
                k,
                &g.0,
                suite,
                &[LABEL_FRAME_KEY, &[suite as u8]],
                LABEL_FRAME_IV,
            )?,
        })
    }
}

/// The drone's group pool `P`: every accepted handshake is absorbed into it, and every group secret
/// is drawn from it with fresh randomness; it ratchets forward at every draw (the old value is
/// overwritten). Wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop, Default)]
pub struct GroupPool([u8; 32]);

impl core::fmt::Debug for GroupPool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("GroupPool(..)")
    }
}

impl GroupPool {
    /// The pool at start: 32 zero bytes.
    pub const fn new() -> Self {
        GroupPool([0; 32])
    }

    /// `P = HKDF-Extract(salt = P, IKM = C)`.
    pub fn absorb(&mut self, c: &Contribution) {
        let (prk, _) = Hkdf::<Sha256>::extract(Some(&self.0), &c.0);
        let mut prk: [u8; 32] = prk.into();
        self.0.copy_from_slice(&prk);
        prk.zeroize();
    }

    /// Draws the group secret of epoch `epoch` with the fresh random bytes `fresh`, and ratchets.
    pub fn draw(&mut self, fresh: &[u8; 32], epoch: u32) -> GroupSecret {
        let mut ikm = [0u8; 36];
        ikm[..32].copy_from_slice(fresh);
        ikm[32..].copy_from_slice(&epoch.to_le_bytes());
        let (prk, _) = Hkdf::<Sha256>::extract(Some(&self.0), &ikm);
        ikm.zeroize();
        let mut prk: [u8; 32] = prk.into();
        expand(&prk, &[LABEL_POOL], &mut self.0);
        let mut g = [0u8; 32];
        expand(&prk, &[LABEL_GROUP_SECRET], &mut g);
        prk.zeroize();
        GroupSecret(g)
    }

    #[cfg(test)]
    pub(crate) fn bytes(&self) -> [u8; 32] {
        self.0
    }
}

/// One key-log line (one per epoch a session learns), in the spirit of TLS's `SSLKEYLOGFILE`:
///
/// ```text
/// GAPSTREAM_KEYLOG_V2 <session id, 16 hex> <epoch> <suite> <frame key> <frame iv> <d2r ctrl key> <d2r ctrl iv> <r2d ctrl key> <r2d ctrl iv>
/// ```
///
/// The session id (the hello id) appears in clear in the HELLO, the ACCEPT and every control
/// message of a capture, and the epoch in every frame header, so a tool can match lines to
/// messages; with the frame key and IV any ChaCha20-Poly1305 / AES-GCM implementation opens a frame
/// (nonce = iv XOR be64(sequence), associated data = the 36-byte header), with the control keys the
/// GROUP_KEY messages. A debugging aid: anyone holding the file can read the stream. Off unless
/// configured.
#[derive(Clone)]
pub struct KeyLogLine {
    pub session: [u8; 8],
    pub suite: Suite,
    pub group: GroupKeys,
    pub session_keys: SessionKeys,
}

impl core::fmt::Debug for KeyLogLine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyLogLine")
            .field("epoch", &self.group.epoch)
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
        let (g, s) = (&self.group, &self.session_keys);
        write!(
            f,
            "GAPSTREAM_KEYLOG_V2 {} {} {} {} {} {} {} {} {}",
            Hex(&self.session),
            g.epoch,
            self.suite.name(),
            Hex(g.frame.key.key()),
            Hex(&g.frame.iv.0),
            Hex(s.d2r_control.key.key()),
            Hex(&s.d2r_control.iv.0),
            Hex(s.r2d_control.key.key()),
            Hex(&s.r2d_control.iv.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;
    use gap_rust_cipher_s::Sequential;
    use sha2::Digest;

    type HmacSha256 = hmac::Hmac<Sha256>;
    fn hmac(k: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        use hmac::{KeyInit, Mac};
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(k).unwrap();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// The schedule recomputed with `hmac` directly (RFC 5869 by hand), independent of `hkdf`.
    #[test]
    fn schedule_matches_rfc5869_by_hand() {
        let h = sha2::Sha256::digest(b"transcript");
        let (k1, k2, kex) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        let mut ikm = [0u8; 96];
        ikm[..32].copy_from_slice(&k1);
        ikm[32..64].copy_from_slice(&k2);
        ikm[64..].copy_from_slice(&kex);
        let prk = hmac(&h, &[&ikm]);
        let s = hmac(&prk, &[b"gapstream v2 session", &[1]]);
        let ours = SessionSecret::initial(&h, &k1, &k2, &kex);
        assert_eq!(ours.0, s);
        let sk = SessionKeys::derive(&mut Sequential, &ours).unwrap();
        assert_eq!(
            sk.d2r_control.key.key(),
            &hmac(&s, &[b"gapstream v2 d2r control key", &[1]])
        );
        assert_eq!(
            sk.r2d_control.iv.0,
            hmac(&s, &[b"gapstream v2 r2d control iv", &[1]])[..12]
        );
        // The pool: absorb C, then draw epoch 5 with R.
        let c = hmac(&s, &[b"gapstream v2 group contribution", &[1]]);
        let p1 = hmac(&[0u8; 32], &[&c]);
        let mut pool = GroupPool::new();
        pool.absorb(&ours.contribution());
        assert_eq!(pool.0, p1);
        let r = [9u8; 32];
        let prk5 = hmac(&p1, &[&r, &5u32.to_le_bytes()]);
        let g = pool.draw(&r, 5);
        assert_eq!(
            g.0,
            hmac(&prk5, &[b"gapstream v2 group epoch secret", &[1]])
        );
        assert_eq!(pool.0, hmac(&prk5, &[b"gapstream v2 group pool", &[1]]));
        let gk = GroupKeys::derive(&mut Sequential, &g, 5, Suite::ChaCha20Poly1305).unwrap();
        assert_eq!(
            gk.frame.key.key(),
            &hmac(&g.0, &[b"gapstream v2 group frame key", &[0x11], &[1]])
        );
        assert_eq!(
            gk.frame.iv.0,
            hmac(&g.0, &[b"gapstream v2 group frame iv", &[1]])[..12]
        );
        let gcm = GroupKeys::derive(&mut Sequential, &g, 5, Suite::Aes128Gcm).unwrap();
        assert_eq!(
            gcm.frame.key.key(),
            &hmac(&g.0, &[b"gapstream v2 group frame key", &[0x12], &[1]])[..16]
        );
        // Different purposes never share a key.
        assert_ne!(sk.d2r_control.key.key(), sk.r2d_control.key.key());
        assert_ne!(sk.d2r_control.iv, sk.r2d_control.iv);
        assert_ne!(gk.frame.key.key(), sk.d2r_control.key.key());
    }

    /// The same fresh randomness drawn from pools that absorbed different handshakes gives
    /// different group secrets (a drone whose random numbers repeat after a restart).
    #[test]
    fn pool_separates_replayed_randomness() {
        let mut a = GroupPool::new();
        let mut b = GroupPool::new();
        a.absorb(&SessionSecret::from_bytes([1; 32]).contribution());
        b.absorb(&SessionSecret::from_bytes([2; 32]).contribution());
        let r = [7u8; 32];
        assert_ne!(a.draw(&r, 0).0, b.draw(&r, 0).0);
        // And one pool never draws the same secret twice, even with the same R and epoch.
        let g1 = a.draw(&r, 1);
        let g2 = a.draw(&r, 1);
        assert_ne!(g1.0, g2.0);
        assert_ne!(a.bytes(), [0; 32]);
    }

    #[test]
    fn keylog_line_format() {
        let g = GroupKeys::derive(&mut Sequential, &GroupSecret([9; 32]), 7, Suite::None).unwrap();
        let s = SessionKeys::derive(&mut Sequential, &SessionSecret([8; 32])).unwrap();
        let line = alloc::format!(
            "{}",
            KeyLogLine {
                session: [0xAB; 8],
                suite: Suite::None,
                group: g,
                session_keys: s,
            }
        );
        let f: alloc::vec::Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 10);
        assert_eq!(f[0], "GAPSTREAM_KEYLOG_V2");
        assert_eq!(f[1], "abababababababab");
        assert_eq!(f[2], "7");
        assert_eq!(f[3], "none");
        assert_eq!(f[4], "-");
        assert_eq!(hex(f[5]).len(), 12);
        assert_eq!(hex(f[6]).len(), 32);
    }
}
