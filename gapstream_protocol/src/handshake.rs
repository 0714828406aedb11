//! The handshake: `Noise_KK_25519_ChaChaPoly_SHA256` with the key-establishment mode and the frame
//! suite negotiated inside it.
//!
//! ```text
//! receiver (initiator)                                         drone (responder)
//! HELLO  = hdr(hello id, key id, time) ‖ KK msg 1: e, es, ss, ENC(offer) ‖ MAC  →
//!                                                          ←  ACCEPT = hdr(hello id, key id) ‖ KK msg 2: e, ee, se, ENC(choice)
//! offer  = suites (receiver's preference order), modes with their key shares
//!          (P-256: ephemeral point; RSA: the receiver's 2048-bit modulus)
//! choice = suite, mode, the drone's boot counter, the drone's share (P-256: ephemeral point;
//!          RSA: OAEP(secret))
//! ```
//!
//! * Before any Diffie-Hellman the drone checks the HELLO's MAC ([`hello_mac`], keyed by a secret
//!   both ends derive once from their static keys, [`HelloMacKey`]) and that its hello time is
//!   above the greatest it accepted from that receiver: a replayed HELLO costs an HMAC, not a
//!   responder handshake. The time is also in the Noise prologue.
//! * The drone's boot counter (persistent, advanced at every start, `gapstream_drone::boot`) is in
//!   the authenticated choice, so it is hashed into `h` and every session key: messages a receiver
//!   sent to an earlier boot of the drone (a recorded KEY_ACK) never open in a later one, even if
//!   the drone's randomness repeats and the receiver's HELLO is replayed. It is also mixed into the
//!   seed of the drone's ephemeral key, so a repeated random stream does not repeat the ephemeral.
//!
//! * Both sides know each other's static X25519 key from pairing (KK); a drone may be paired with
//!   several receivers ([`DroneIdentity`]): the HELLO's key id says which of their keys to use. The
//!   HELLO payload is
//!   encrypted under `es` and `ss`, so only the paired receiver can make one the drone accepts; the
//!   ACCEPT is encrypted under `ee` and `se`, so only the paired drone can answer it. Everything sent
//!   (ephemerals, offer, choice, the hello id through the prologue) is hashed into the handshake
//!   hash `h` that keys everything afterwards: an attacker who strips a suite or a mode from the
//!   offer, or swaps a key share, makes the AEAD of the Noise message fail — the downgrade is
//!   detected, not negotiated.
//! * Frame keys come from `h`, Noise's split keys and the mode's secret ([`crate::keys`]), so the
//!   P-256 and RSA modes are authenticated by the same static keys and the session stays secure if
//!   either X25519 or the mode's primitive holds.
//! * The receiver initiates because it is the one that learns when a connection exists (its TCP
//!   connect to the ESP32, or its first UDP datagram); the drone answers and can stream the first
//!   frame right after its ACCEPT — one round trip, no third message.

use alloc::vec;
use alloc::vec::Vec;

use p256::elliptic_curve::Generate;
use p256::elliptic_curve::sec1::ToSec1Point;
use rand_core::CryptoRng;
use zeroize::{Zeroize, Zeroizing};

use crate::keys::SessionSecret;
use crate::noise;
use crate::rsa_oaep;
use crate::suite::{KexMode, Suite};
use crate::wire::{self, AlertCode, HandshakeHeader, MsgType, WireError};

/// P-256 uncompressed SEC1 point length.
pub const P256_SHARE_LEN: usize = 65;
/// Prologue of the Noise handshake, followed by the 8-byte hello id, the 4-byte receiver key id and
/// the HELLO's 8-byte time (little-endian).
pub const PROLOGUE: &[u8] = b"gapstream v3 hello ";
/// HKDF salt of the HELLO MAC key ([`HelloMacKey`]).
pub const HELLO_MAC_LABEL: &[u8] = b"gapstream v3 hello mac";
/// Label of the drone's ephemeral seed: `SHA-256(label ‖ le32(boot counter) ‖ 32 random bytes)`.
pub const BOOT_SEED_LABEL: &[u8] = b"gapstream v2 drone boot";
/// Most receiver keys a drone can be paired with.
pub const MAX_RECEIVER_KEYS: usize = 8;

/// A receiver's 4-byte key id: the first bytes of `SHA-256("gapstream v2 receiver key id" ‖ its
/// static public key)`. The HELLO carries it so a drone paired with several receivers knows which
/// public key the Noise_KK handshake uses without trying them all.
pub fn receiver_key_id(public: &[u8; 32]) -> [u8; 4] {
    use sha2::Digest;
    let d = sha2::Sha256::new()
        .chain_update(b"gapstream v2 receiver key id")
        .chain_update(public)
        .finalize();
    [d[0], d[1], d[2], d[3]]
}

/// The key of the HELLO MAC between one receiver and its drone:
/// `HKDF-SHA256(salt = "gapstream v3 hello mac", IKM = X25519(drone static, receiver static),
/// info = "", 32 bytes)`. Only the two paired ends can compute it (it needs one of the two static
/// private keys); each derives it once (the receiver when its session is made, the drone for every
/// paired receiver when it starts), not per HELLO. Wiped on drop.
#[derive(Clone, zeroize::ZeroizeOnDrop, Zeroize)]
pub struct HelloMacKey([u8; 32]);

impl core::fmt::Debug for HelloMacKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HelloMacKey(..)")
    }
}

impl HelloMacKey {
    /// The key between `local` and the peer whose static public key is `peer_public` (the same on
    /// both ends).
    pub fn derive(local: &StaticSecret, peer_public: &[u8; 32]) -> Self {
        let mut dh = noise::x25519(&local.0, peer_public);
        let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(HELLO_MAC_LABEL), &dh);
        dh.zeroize();
        let mut k = [0u8; 32];
        hk.expand(&[], &mut k).expect("32 bytes of HKDF-SHA256");
        HelloMacKey(k)
    }
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// The MAC that ends a HELLO: the first 16 bytes of `HMAC-SHA256(key, everything before it)`.
pub fn hello_mac(key: &HelloMacKey, maced: &[u8]) -> [u8; wire::HELLO_MAC_LEN] {
    use hkdf::hmac::{Mac, SimpleHmac};
    let mut m = <SimpleHmac<sha2::Sha256> as hkdf::hmac::KeyInit>::new_from_slice(&key.0)
        .expect("HMAC takes any key length");
    m.update(maced);
    let t = m.finalize().into_bytes();
    let mut out = [0u8; wire::HELLO_MAC_LEN];
    out.copy_from_slice(&t[..wire::HELLO_MAC_LEN]);
    out
}

/// Checks a HELLO's MAC in constant time; its parts when it holds.
pub fn verify_hello<'a>(
    key: &HelloMacKey,
    hello: &'a [u8],
) -> Result<wire::HelloParts<'a>, HandshakeError> {
    use subtle::ConstantTimeEq;
    let p = wire::decode_hello(hello)?;
    if bool::from(hello_mac(key, p.maced).ct_eq(p.mac)) {
        Ok(p)
    } else {
        Err(HandshakeError::Authentication)
    }
}

/// A long-term X25519 secret key (one per device, made by pairing). Wiped on drop.
#[derive(Clone, zeroize::ZeroizeOnDrop, Zeroize)]
pub struct StaticSecret([u8; 32]);

impl core::fmt::Debug for StaticSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("StaticSecret(..)")
    }
}

impl StaticSecret {
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut b = [0u8; 32];
        rng.fill_bytes(&mut b);
        StaticSecret(b)
    }
    pub const fn from_bytes(b: [u8; 32]) -> Self {
        StaticSecret(b)
    }
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0
    }
    pub fn public(&self) -> [u8; 32] {
        noise::x25519_public(&self.0)
    }
}

/// What pairing gives one device: its own secret key and the peer's public key.
#[derive(Clone, Debug)]
pub struct Identity {
    pub local: StaticSecret,
    pub peer_public: [u8; 32],
}

/// Which end of the stream a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Drone,
    Receiver,
}

impl Role {
    pub const fn name(self) -> &'static str {
        match self {
            Role::Drone => "drone",
            Role::Receiver => "receiver",
        }
    }
}

/// Pairing: fresh static keys for a drone and a receiver that know each other.
pub fn pair<R: CryptoRng + ?Sized>(rng: &mut R) -> (Identity, Identity) {
    let d = StaticSecret::generate(rng);
    let r = StaticSecret::generate(rng);
    let (dp, rp) = (d.public(), r.public());
    (
        Identity {
            local: d,
            peer_public: rp,
        },
        Identity {
            local: r,
            peer_public: dp,
        },
    )
}

/// Pairing of a drone with `n` receivers (1..=[`MAX_RECEIVER_KEYS`]), each with its own key.
pub fn pair_group<R: CryptoRng + ?Sized>(rng: &mut R, n: usize) -> (DroneIdentity, Vec<Identity>) {
    let n = n.clamp(1, MAX_RECEIVER_KEYS);
    let d = StaticSecret::generate(rng);
    let dp = d.public();
    let receivers: Vec<Identity> = (0..n)
        .map(|_| Identity {
            local: StaticSecret::generate(rng),
            peer_public: dp,
        })
        .collect();
    let keys = receivers.iter().map(|r| r.local.public()).collect();
    (
        DroneIdentity {
            local: d,
            receivers: keys,
            watch_only: 0,
        },
        receivers,
    )
}

/// A drone's pairing: its static key and the public keys of the receivers it accepts (at most
/// [`MAX_RECEIVER_KEYS`], each with a distinct [`receiver_key_id`]).
///
/// Why one key per receiver rather than one receiver identity shared by a group: each receiver
/// authenticates as itself, so the drone can tell a receiver that reconnects (its new session
/// replaces only its own) from a new member (which triggers a rekey), a stolen receiver file lets
/// the thief impersonate that receiver only, and re-pairing one receiver does not touch the others.
/// A shared identity is simpler to hand out (one file copied to every listener) but the drone
/// could not tell members apart, so one member could evict another's session, and a leak of the
/// file compromises the whole group. The cost of per-receiver keys is provisioning: the drone's
/// pairing file lists every receiver's public key (`gapstream pair --receivers N`).
///
/// A receiver may be paired to watch only (`watch_only`, a `watcher_public=` line): it gets the
/// group key and every frame like the others, but the drone refuses its requests that change
/// what the drone sends (SET_QUALITY), so a listener handed to a third party cannot steer the
/// stream that the leader sees.
#[derive(Clone, Debug)]
pub struct DroneIdentity {
    pub local: StaticSecret,
    pub receivers: Vec<[u8; 32]>,
    /// Bit `i` set: receiver `i` watches only (its SET_QUALITY is refused).
    pub watch_only: u16,
}

impl From<Identity> for DroneIdentity {
    fn from(id: Identity) -> Self {
        DroneIdentity {
            local: id.local,
            receivers: alloc::vec![id.peer_public],
            watch_only: 0,
        }
    }
}

impl DroneIdentity {
    /// The Noise identity for receiver `index`.
    pub fn for_receiver(&self, index: usize) -> Option<Identity> {
        Some(Identity {
            local: self.local.clone(),
            peer_public: *self.receivers.get(index)?,
        })
    }

    /// The index of the receiver whose key id is `key_id`.
    pub fn receiver_index(&self, key_id: &[u8; 4]) -> Option<usize> {
        self.receivers
            .iter()
            .position(|p| receiver_key_id(p) == *key_id)
    }

    /// Whether receiver `index` may change what the drone sends (SET_QUALITY): every paired
    /// receiver but those paired to watch only.
    pub fn may_steer(&self, index: usize) -> bool {
        index < self.receivers.len() && self.watch_only >> index & 1 == 0
    }

    /// Checks the bounds: 1..=[`MAX_RECEIVER_KEYS`] receivers with distinct key ids, the
    /// watch-only bits only on receivers that exist.
    pub fn check(&self) -> Result<(), PairingError> {
        if self.receivers.is_empty() || self.receivers.len() > MAX_RECEIVER_KEYS {
            return Err(PairingError::ReceiverCount(self.receivers.len()));
        }
        if self.watch_only >> self.receivers.len() != 0 {
            return Err(PairingError::WatcherBeyondReceivers);
        }
        for (i, a) in self.receivers.iter().enumerate() {
            if self.receivers[..i]
                .iter()
                .any(|b| receiver_key_id(a) == receiver_key_id(b))
            {
                return Err(PairingError::DuplicateReceiver);
            }
        }
        Ok(())
    }

    /// The drone's pairing file: like [`Identity::to_pairing_text`], one line per receiver in
    /// the receivers' order: `peer_public=` for a receiver that may steer the stream,
    /// `watcher_public=` for one that watches only.
    pub fn to_pairing_text(&self) -> alloc::string::String {
        let mut s = Identity {
            local: self.local.clone(),
            peer_public: self.receivers[0],
        }
        .to_pairing_text(Role::Drone);
        // That text ends with its one `peer_public=` line: one line per receiver instead.
        s.truncate(s.rfind("peer_public=").expect("written above"));
        for (i, p) in self.receivers.iter().enumerate() {
            s.push_str(if self.may_steer(i) {
                "peer_public="
            } else {
                WATCHER_FIELD
            });
            push_hex(&mut s, p);
            s.push('\n');
        }
        s
    }

    /// Parses a drone's pairing file (one or more `peer_public=` / `watcher_public=` lines).
    pub fn from_pairing_text(text: &str) -> Result<Self, PairingError> {
        let p = parse_pairing(text)?;
        if p.role != Role::Drone {
            return Err(PairingError::BadRole);
        }
        let id = DroneIdentity {
            local: p.local,
            receivers: p.peers,
            watch_only: p.watchers,
        };
        id.check()?;
        Ok(id)
    }
}

/// Why a pairing file could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairingError {
    MissingField(&'static str),
    BadHex(&'static str),
    BadRole,
    /// A drone file lists no receiver or more than [`MAX_RECEIVER_KEYS`]; a receiver file lists
    /// more than one drone.
    ReceiverCount(usize),
    /// Two receiver keys with the same key id.
    DuplicateReceiver,
    /// A watch-only bit ([`DroneIdentity::watch_only`]) names no paired receiver.
    WatcherBeyondReceivers,
    /// `local_public` is well formed but is not the public key of `local_secret` (an edited or
    /// damaged file, or lines from two pairings mixed).
    SecretMismatch,
}

impl core::fmt::Display for PairingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PairingError::MissingField(k) => write!(f, "pairing file has no `{k}=` line"),
            PairingError::BadHex(k) => write!(f, "pairing file field `{k}` is not 64 hex digits"),
            PairingError::BadRole => f.write_str("pairing file role must be `drone` or `receiver`"),
            PairingError::ReceiverCount(n) => write!(
                f,
                "pairing file has {n} `peer_public=` lines (a drone: 1..={MAX_RECEIVER_KEYS}, a receiver: 1)"
            ),
            PairingError::DuplicateReceiver => {
                f.write_str("pairing file lists the same receiver key twice")
            }
            PairingError::WatcherBeyondReceivers => {
                f.write_str("a watch-only receiver is not among the paired receivers")
            }
            PairingError::SecretMismatch => f.write_str(
                "pairing file's `local_secret` does not belong to its `local_public` (the file was edited or mixes two pairings; pair again)",
            ),
        }
    }
}

impl core::error::Error for PairingError {}

fn parse_hex32(s: &str, field: &'static str) -> Result<[u8; 32], PairingError> {
    let s = s.trim().as_bytes();
    if s.len() != 64 {
        return Err(PairingError::BadHex(field));
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        let hi = (s[2 * i] as char)
            .to_digit(16)
            .ok_or(PairingError::BadHex(field))?;
        let lo = (s[2 * i + 1] as char)
            .to_digit(16)
            .ok_or(PairingError::BadHex(field))?;
        *o = (hi * 16 + lo) as u8;
    }
    Ok(out)
}

fn push_hex(s: &mut alloc::string::String, b: &[u8]) {
    use core::fmt::Write;
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
}

/// A drone pairing file's line for a receiver that watches only.
const WATCHER_FIELD: &str = "watcher_public=";

/// A pairing file's fields: its role, local secret, every peer (`peer_public=` and a drone's
/// `watcher_public=` lines, in the file's order; at most one more than [`MAX_RECEIVER_KEYS`])
/// and which of them are watchers (bit `i`).
struct Pairing {
    role: Role,
    local: StaticSecret,
    peers: Vec<[u8; 32]>,
    watchers: u16,
}

/// Reads a pairing file. A plain loop rather than an iterator collected into a `Result`: the
/// drone parses its built-in file at boot, and the firmware's L2 has little room for code (the
/// iterator form of this function made the JPEG firmware's text 992 bytes larger, measured).
fn parse_pairing(text: &str) -> Result<Pairing, PairingError> {
    let values = |k: &'static str| {
        text.lines()
            .filter_map(move |l| l.trim().strip_prefix(k).and_then(|r| r.strip_prefix('=')))
    };
    let field = |k: &'static str| values(k).next().ok_or(PairingError::MissingField(k));
    let role = match field("role")?.trim() {
        "drone" => Role::Drone,
        "receiver" => Role::Receiver,
        _ => return Err(PairingError::BadRole),
    };
    let local = StaticSecret(parse_hex32(field("local_secret")?, "local_secret")?);
    if let Ok(p) = field("local_public") {
        if parse_hex32(p, "local_public")? != local.public() {
            return Err(PairingError::SecretMismatch);
        }
    }
    let mut peers = Vec::new();
    let mut watchers = 0u16;
    for l in text.lines() {
        if peers.len() > MAX_RECEIVER_KEYS {
            break;
        }
        let l = l.trim();
        let (v, field, watcher) = if let Some(v) = l.strip_prefix("peer_public=") {
            (v, "peer_public", false)
        } else if let Some(v) = l
            .strip_prefix(WATCHER_FIELD)
            .filter(|_| role == Role::Drone)
        {
            (v, "watcher_public", true)
        } else {
            continue;
        };
        watchers |= u16::from(watcher) << peers.len();
        peers.push(parse_hex32(v, field)?);
    }
    if peers.is_empty() {
        return Err(PairingError::MissingField("peer_public"));
    }
    Ok(Pairing {
        role,
        local,
        peers,
        watchers,
    })
}

impl Identity {
    /// The text of a pairing file:
    ///
    /// ```text
    /// # gapstream pairing file: keep it secret (it holds this device's private key)
    /// role=drone
    /// local_secret=<64 hex>
    /// local_public=<64 hex>
    /// peer_public=<64 hex>
    /// ```
    pub fn to_pairing_text(&self, role: Role) -> alloc::string::String {
        use core::fmt::Write;
        let mut s = alloc::string::String::new();
        s.push_str(
            "# gapstream pairing file: keep it secret (it holds this device's private key)\n",
        );
        let _ = writeln!(s, "role={}", role.name());
        s.push_str("local_secret=");
        push_hex(&mut s, &self.local.0);
        s.push_str("\nlocal_public=");
        push_hex(&mut s, &self.local.public());
        s.push_str("\npeer_public=");
        push_hex(&mut s, &self.peer_public);
        s.push('\n');
        s
    }

    /// Parses [`Identity::to_pairing_text`] (`local_public`, when present, must match the secret).
    /// A drone file that lists several receivers is refused here
    /// ([`PairingError::ReceiverCount`]): read it with [`DroneIdentity::from_pairing_text`].
    pub fn from_pairing_text(text: &str) -> Result<(Role, Identity), PairingError> {
        let p = parse_pairing(text)?;
        if p.peers.len() != 1 {
            return Err(PairingError::ReceiverCount(p.peers.len()));
        }
        Ok((
            p.role,
            Identity {
                local: p.local,
                peer_public: p.peers[0],
            },
        ))
    }
}

/// A set of suites (bit `suite as u8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SuiteSet(u32);

impl SuiteSet {
    pub const fn empty() -> Self {
        SuiteSet(0)
    }
    /// The authenticated suites (the default).
    pub const fn authenticated() -> Self {
        SuiteSet(1 << Suite::ChaCha20Poly1305 as u8 | 1 << Suite::Aes128Gcm as u8)
    }
    pub const fn all() -> Self {
        let mut s = 0;
        let mut i = 0;
        while i < Suite::ALL.len() {
            s |= 1 << Suite::ALL[i] as u8;
            i += 1;
        }
        SuiteSet(s)
    }
    pub const fn with(self, s: Suite) -> Self {
        SuiteSet(self.0 | 1 << s as u8)
    }
    pub const fn contains(self, s: Suite) -> bool {
        self.0 & 1 << s as u8 != 0
    }
}

impl FromIterator<Suite> for SuiteSet {
    fn from_iter<T: IntoIterator<Item = Suite>>(iter: T) -> Self {
        iter.into_iter().fold(SuiteSet::empty(), SuiteSet::with)
    }
}

/// A set of key-establishment modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct KexSet(u8);

impl KexSet {
    pub const fn empty() -> Self {
        KexSet(0)
    }
    pub const fn all() -> Self {
        KexSet(
            1 << KexMode::X25519 as u8 | 1 << KexMode::P256 as u8 | 1 << KexMode::RsaOaep2048 as u8,
        )
    }
    pub const fn with(self, m: KexMode) -> Self {
        KexSet(self.0 | 1 << m as u8)
    }
    pub const fn contains(self, m: KexMode) -> bool {
        self.0 & 1 << m as u8 != 0
    }
}

impl FromIterator<KexMode> for KexSet {
    fn from_iter<T: IntoIterator<Item = KexMode>>(iter: T) -> Self {
        iter.into_iter().fold(KexSet::empty(), KexSet::with)
    }
}

/// Why a handshake failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// The message is not a well-formed HELLO / ACCEPT.
    Wire(WireError),
    /// The Noise message did not authenticate: the peer does not hold the paired static key, or
    /// the message was altered (including any attempt to change the offer or the choice).
    Authentication,
    /// The authenticated payload is malformed.
    BadPayload,
    /// No offered suite is allowed by the drone.
    NoCommonSuite,
    /// No offered mode is allowed by the drone.
    NoCommonKexMode,
    /// The drone chose a suite or mode that was not offered.
    UnexpectedChoice,
    /// The drone refused with an ALERT (unauthenticated: could also be an attacker's).
    Refused(u8),
    /// An ACCEPT / ALERT for another HELLO.
    HelloIdMismatch,
    /// A P-256 point is not on the curve.
    BadP256Point,
    /// RSA-OAEP failed.
    Rsa(rsa_oaep::RsaError),
    /// RSA mode offered but the receiver has no RSA key (or RSA decryption is not built for this
    /// target).
    RsaKeyMissing,
    /// The receiver offered nothing.
    EmptyOffer,
    /// Every receiver slot of the drone is taken by other receivers.
    GroupFull,
    /// A HELLO whose time is not above the greatest the drone accepted from that receiver: a
    /// replay (or the receiver's clock went back). Refused before any Diffie-Hellman, silently.
    Replayed,
    /// The drone answered a HELLO of that receiver less than
    /// [`crate::session::DroneConfig::hello_interval_ns`] ago, or holds as many unconfirmed
    /// sessions of it as it keeps: refused before any Diffie-Hellman (ALERT 7, retry later).
    Busy,
    /// Internal Noise state error.
    Noise,
}

impl From<WireError> for HandshakeError {
    fn from(e: WireError) -> Self {
        HandshakeError::Wire(e)
    }
}

impl core::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HandshakeError::Wire(e) => write!(f, "malformed handshake message: {e}"),
            HandshakeError::Authentication => f.write_str(
                "handshake authentication failed: the peer does not hold the paired key (wrong pairing?) or the message was altered",
            ),
            HandshakeError::BadPayload => f.write_str("malformed handshake payload"),
            HandshakeError::NoCommonSuite => f.write_str("no common frame suite"),
            HandshakeError::NoCommonKexMode => f.write_str("no common key-establishment mode"),
            HandshakeError::UnexpectedChoice => f.write_str("the drone chose a suite or mode that was not offered"),
            HandshakeError::Refused(c) => match AlertCode::from_u8(*c) {
                Some(a) => write!(f, "drone refused the handshake: {}", a.description()),
                None => write!(f, "drone refused the handshake (alert code {c})"),
            },
            HandshakeError::HelloIdMismatch => f.write_str("answer to another HELLO"),
            HandshakeError::BadP256Point => f.write_str("invalid P-256 point"),
            HandshakeError::Rsa(e) => write!(f, "RSA key transport: {e}"),
            HandshakeError::RsaKeyMissing => f.write_str("RSA mode offered without an RSA key"),
            HandshakeError::EmptyOffer => f.write_str("no suite or no mode to offer"),
            HandshakeError::GroupFull => f.write_str("every receiver slot of the drone is taken"),
            HandshakeError::Replayed => f.write_str(
                "HELLO not newer than one already accepted from this receiver (a replay, or its clock went back)",
            ),
            HandshakeError::Busy => {
                f.write_str("the drone is answering another HELLO of this receiver: retry later")
            }
            HandshakeError::Noise => f.write_str("internal Noise state error"),
        }
    }
}

impl core::error::Error for HandshakeError {}

/// The result of a completed handshake.
pub struct Established {
    pub suite: Suite,
    pub mode: KexMode,
    /// The hello id, which is the session's id from now on.
    pub hello_id: [u8; 8],
    /// The drone's boot counter (authenticated, in the choice).
    pub drone_boot: u32,
    pub(crate) secret: SessionSecret,
}

impl core::fmt::Debug for Established {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Established")
            .field("suite", &self.suite)
            .field("mode", &self.mode)
            .field("hello_id", &self.hello_id)
            .finish_non_exhaustive()
    }
}

fn prologue(hello_id: &[u8; 8], key_id: &[u8; 4], time: u64) -> [u8; 39] {
    let mut p = [0u8; 39];
    p[..19].copy_from_slice(PROLOGUE);
    p[19..27].copy_from_slice(hello_id);
    p[27..31].copy_from_slice(key_id);
    p[31..].copy_from_slice(&time.to_le_bytes());
    p
}

fn seed<R: CryptoRng + ?Sized>(rng: &mut R) -> [u8; 32] {
    let mut s = [0u8; 32];
    rng.fill_bytes(&mut s);
    s
}

/// The drone's ephemeral seed: its random bytes mixed with its boot counter, so that two boots
/// whose random streams repeat still use different ephemeral keys.
fn boot_seed<R: CryptoRng + ?Sized>(rng: &mut R, boot: u32) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut r = seed(rng);
    let mut h = Sha256::new();
    h.update(BOOT_SEED_LABEL);
    h.update(boot.to_le_bytes());
    h.update(r);
    r.zeroize();
    h.finalize().into()
}

fn handshake_message(t: MsgType, hello_id: [u8; 8], key_id: [u8; 4], noise: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(wire::HANDSHAKE_HEADER_LEN + noise.len());
    m.extend_from_slice(
        &HandshakeHeader {
            msg_type: t,
            hello_id,
            key_id,
            noise_len: noise.len() as u16,
        }
        .encode(),
    );
    m.extend_from_slice(noise);
    m
}

fn split(hs: &mut snow::HandshakeState, kex_secret: &[u8]) -> SessionSecret {
    let (mut k1, mut k2) = hs.dangerously_get_raw_split();
    let s = SessionSecret::initial(hs.get_handshake_hash(), &k1, &k2, kex_secret);
    k1.zeroize();
    k2.zeroize();
    s
}

/// Reads the share length-prefixed fields of the payloads.
struct Reader<'a>(&'a [u8]);
impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, HandshakeError> {
        let (&b, rest) = self.0.split_first().ok_or(HandshakeError::BadPayload)?;
        self.0 = rest;
        Ok(b)
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], HandshakeError> {
        if self.0.len() < n {
            return Err(HandshakeError::BadPayload);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, HandshakeError> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn end(&self) -> Result<(), HandshakeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(HandshakeError::BadPayload)
        }
    }
}

fn share_len(mode: KexMode) -> usize {
    match mode {
        KexMode::X25519 => 0,
        KexMode::P256 => P256_SHARE_LEN,
        KexMode::RsaOaep2048 => rsa_oaep::MODULUS_LEN,
    }
}

/// The HELLO payload (encrypted by Noise): `n_suites u8, suites…, n_modes u8,
/// { mode u8, share_len u16, share }…`.
pub fn encode_offer(suites: &[Suite], shares: &[(KexMode, &[u8])]) -> Vec<u8> {
    let mut p = Vec::new();
    p.push(suites.len() as u8);
    p.extend(suites.iter().map(|s| *s as u8));
    p.push(shares.len() as u8);
    for (m, share) in shares {
        p.push(*m as u8);
        p.extend_from_slice(&(share.len() as u16).to_le_bytes());
        p.extend_from_slice(share);
    }
    p
}

/// The ACCEPT payload (encrypted by Noise): `suite u8, mode u8, boot counter u32, share_len u16,
/// share`.
pub fn encode_choice(suite: Suite, mode: KexMode, boot: u32, share: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + share.len());
    p.push(suite as u8);
    p.push(mode as u8);
    p.extend_from_slice(&boot.to_le_bytes());
    p.extend_from_slice(&(share.len() as u16).to_le_bytes());
    p.extend_from_slice(share);
    p
}

/// Opens the drone's RSA-OAEP ciphertext with the receiver's RSA key (RSA mode only).
pub type RsaDecrypt<'a> = dyn FnMut(&[u8]) -> Result<Zeroizing<Vec<u8>>, HandshakeError> + 'a;

/// The receiver's side of the handshake, between sending HELLO and reading ACCEPT.
pub struct ReceiverHandshake {
    hs: snow::HandshakeState,
    hello_id: [u8; 8],
    key_id: [u8; 4],
    suites: Vec<Suite>,
    modes: Vec<KexMode>,
    p256: Option<p256::ecdh::EphemeralSecret>,
}

impl core::fmt::Debug for ReceiverHandshake {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReceiverHandshake")
            .field("hello_id", &self.hello_id)
            .finish_non_exhaustive()
    }
}

/// What the receiver offers.
#[derive(Clone, Debug)]
pub struct Offer<'a> {
    /// Suites in preference order.
    pub suites: &'a [Suite],
    /// Modes in preference order.
    pub modes: &'a [KexMode],
    /// The receiver's RSA modulus (needed when `modes` has RSA).
    pub rsa_modulus: Option<&'a [u8; rsa_oaep::MODULUS_LEN]>,
}

/// What a receiver derives once from its pairing for all its HELLOs: its key id and the HELLO MAC
/// key (an X25519 base-point multiplication and one Diffie-Hellman).
#[derive(Clone, Debug)]
pub struct HelloKeys {
    pub key_id: [u8; 4],
    pub mac: HelloMacKey,
}

impl HelloKeys {
    pub fn new(id: &Identity) -> Self {
        HelloKeys {
            key_id: receiver_key_id(&id.local.public()),
            mac: HelloMacKey::derive(&id.local, &id.peer_public),
        }
    }
}

impl ReceiverHandshake {
    /// Builds the HELLO, with hello time `time` (ns since 1970-01-01 UTC, above the time of every
    /// earlier HELLO of this receiver).
    pub fn start<R: CryptoRng + ?Sized>(
        id: &Identity,
        time: u64,
        offer: &Offer<'_>,
        rng: &mut R,
    ) -> Result<(Self, Vec<u8>), HandshakeError> {
        Self::start_as(id, &HelloKeys::new(id), time, offer, rng)
    }

    /// [`ReceiverHandshake::start`] with the receiver's key id and HELLO MAC key already derived
    /// (a session does it once).
    pub fn start_as<R: CryptoRng + ?Sized>(
        id: &Identity,
        keys: &HelloKeys,
        time: u64,
        offer: &Offer<'_>,
        rng: &mut R,
    ) -> Result<(Self, Vec<u8>), HandshakeError> {
        let key_id = keys.key_id;
        if offer.suites.is_empty()
            || offer.modes.is_empty()
            || offer.suites.len() > 8
            || offer.modes.len() > 3
        {
            return Err(HandshakeError::EmptyOffer);
        }
        let mut hello_id = [0u8; 8];
        rng.fill_bytes(&mut hello_id);
        let mut p256_share = [0u8; P256_SHARE_LEN];
        let p256_secret = offer.modes.contains(&KexMode::P256).then(|| {
            let s = p256::ecdh::EphemeralSecret::generate_from_rng(rng);
            p256_share.copy_from_slice(s.public_key().to_sec1_point(false).as_bytes());
            s
        });
        let mut shares: Vec<(KexMode, &[u8])> = Vec::new();
        for &m in offer.modes {
            match m {
                KexMode::X25519 => shares.push((m, &[])),
                KexMode::P256 => shares.push((m, &p256_share)),
                KexMode::RsaOaep2048 => {
                    shares.push((m, offer.rsa_modulus.ok_or(HandshakeError::RsaKeyMissing)?))
                }
            }
        }
        let payload = encode_offer(offer.suites, &shares);
        let mut hs = noise::builder(seed(rng))
            .prologue(&prologue(&hello_id, &key_id, time))
            .and_then(|b| b.local_private_key(&id.local.0))
            .and_then(|b| b.remote_public_key(&id.peer_public))
            .and_then(|b| b.build_initiator())
            .map_err(|_| HandshakeError::Noise)?;
        let mut msg = vec![0u8; 32 + payload.len() + 16];
        let n = hs
            .write_message(&payload, &mut msg)
            .map_err(|_| HandshakeError::Noise)?;
        msg.truncate(n);
        let mut hello =
            Vec::with_capacity(wire::HELLO_HEADER_LEN + msg.len() + wire::HELLO_MAC_LEN);
        hello.extend_from_slice(
            &wire::HelloHeader {
                hello_id,
                key_id,
                noise_len: msg.len() as u16,
                time,
            }
            .encode(),
        );
        hello.extend_from_slice(&msg);
        let mac = hello_mac(&keys.mac, &hello);
        hello.extend_from_slice(&mac);
        Ok((
            ReceiverHandshake {
                hs,
                hello_id,
                key_id,
                suites: offer.suites.to_vec(),
                modes: offer.modes.to_vec(),
                p256: p256_secret,
            },
            hello,
        ))
    }

    pub fn hello_id(&self) -> [u8; 8] {
        self.hello_id
    }

    /// Reads an ALERT for this HELLO and returns the refusal it carries.
    pub fn read_alert(&self, alert: &[u8]) -> Result<HandshakeError, HandshakeError> {
        let (id, code) = wire::decode_alert(alert)?;
        if id != self.hello_id {
            return Err(HandshakeError::HelloIdMismatch);
        }
        Ok(HandshakeError::Refused(code))
    }

    /// Checks that `accept` answers this HELLO (without touching the Noise state).
    pub fn answers(&self, accept: &[u8]) -> Result<(), HandshakeError> {
        let (h, _) = HandshakeHeader::decode(accept)?;
        if h.msg_type != MsgType::Accept {
            return Err(HandshakeError::Wire(WireError::UnknownType(
                h.msg_type as u8,
            )));
        }
        if h.hello_id != self.hello_id || h.key_id != self.key_id {
            return Err(HandshakeError::HelloIdMismatch);
        }
        Ok(())
    }

    /// Reads the ACCEPT and derives the session. `decrypt_rsa` opens an RSA-OAEP ciphertext (the
    /// receiver's RSA key) when the drone chose RSA.
    ///
    /// An ACCEPT that does not answer this HELLO ([`HandshakeError::HelloIdMismatch`], a
    /// malformed one) or whose Noise message does not authenticate
    /// ([`HandshakeError::Authentication`]: not made by the paired drone, or altered) leaves the
    /// handshake as it was, ready for the real ACCEPT (Noise restores its state when a message does
    /// not decrypt), as WireGuard drops a response that does not authenticate. Any other error
    /// comes from an authenticated ACCEPT: the handshake is spent.
    pub fn finish(
        &mut self,
        accept: &[u8],
        decrypt_rsa: &mut RsaDecrypt<'_>,
    ) -> Result<Established, HandshakeError> {
        self.answers(accept)?;
        let (_, noise_msg) = HandshakeHeader::decode(accept)?;
        let mut payload = Zeroizing::new(vec![0u8; noise_msg.len()]);
        let n = self
            .hs
            .read_message(noise_msg, &mut payload)
            .map_err(|_| HandshakeError::Authentication)?;
        let mut r = Reader(&payload[..n]);
        let suite = Suite::from_u8(r.u8()?).ok_or(HandshakeError::UnexpectedChoice)?;
        let mode = KexMode::from_u8(r.u8()?).ok_or(HandshakeError::UnexpectedChoice)?;
        if !self.suites.contains(&suite) || !self.modes.contains(&mode) {
            return Err(HandshakeError::UnexpectedChoice);
        }
        let b = r.bytes(4)?;
        let drone_boot = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let len = r.u16()? as usize;
        if len != share_len(mode) {
            return Err(HandshakeError::BadPayload);
        }
        let share = r.bytes(len)?;
        r.end()?;
        let kex_secret: Zeroizing<Vec<u8>> = match mode {
            KexMode::X25519 => Zeroizing::new(Vec::new()),
            KexMode::P256 => {
                let peer = p256::PublicKey::from_sec1_bytes(share)
                    .map_err(|_| HandshakeError::BadP256Point)?;
                let mine = self.p256.take().ok_or(HandshakeError::Noise)?;
                Zeroizing::new(mine.diffie_hellman(&peer).raw_secret_bytes().to_vec())
            }
            KexMode::RsaOaep2048 => {
                let s = decrypt_rsa(share)?;
                if s.len() != 32 {
                    return Err(HandshakeError::Rsa(rsa_oaep::RsaError::Decrypt));
                }
                s
            }
        };
        let secret = split(&mut self.hs, &kex_secret);
        Ok(Established {
            suite,
            mode,
            hello_id: self.hello_id,
            drone_boot,
            secret,
        })
    }
}

/// The modes this build's drone side can answer: X25519 always, P-256 and RSA-OAEP-2048 with the
/// features `kex-p256` / `kex-rsa2048` (on by default; the GAP8 firmware leaves them out unless
/// asked, to free L2). [`respond`] never chooses a mode outside this set, whatever the policy.
pub const RESPONDER_MODES: KexSet = {
    let m = KexSet::empty().with(KexMode::X25519);
    #[cfg(feature = "kex-p256")]
    let m = m.with(KexMode::P256);
    #[cfg(feature = "kex-rsa2048")]
    let m = m.with(KexMode::RsaOaep2048);
    m
};

/// The drone's policy for answering a HELLO.
#[derive(Clone, Copy, Debug)]
pub struct DronePolicy {
    pub suites: SuiteSet,
    pub modes: KexSet,
}

impl Default for DronePolicy {
    fn default() -> Self {
        DronePolicy {
            suites: SuiteSet::authenticated(),
            modes: KexSet::all(),
        }
    }
}

/// A refused HELLO: the error and the ALERT to send back (if the HELLO was readable enough).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub error: HandshakeError,
    pub alert: Option<[u8; wire::ALERT_LEN]>,
}

/// The hello id and receiver key id of a HELLO, read without any key (the drone picks the
/// receiver's public key by the key id before the Noise handshake).
pub fn hello_ids(hello: &[u8]) -> Result<([u8; 8], [u8; 4]), WireError> {
    let (h, _) = HandshakeHeader::decode(hello)?;
    if h.msg_type != MsgType::Hello {
        return Err(WireError::UnknownType(h.msg_type as u8));
    }
    Ok((h.hello_id, h.key_id))
}

/// The drone's side: reads a HELLO from the receiver `id.peer_public`, answers with an ACCEPT. A
/// HELLO whose MAC does not verify under `mac_key` (that receiver's [`HelloMacKey`]), or whose key
/// id is not that receiver's, is refused like one that does not authenticate, before any
/// Diffie-Hellman. (Whether the HELLO is fresh — its time above the greatest accepted from that
/// receiver — is the caller's check, [`crate::session::DroneSession`]'s.) `boot` is the drone's
/// boot counter (persistent, advanced at every start): it goes into the authenticated choice and
/// into the seed of the drone's ephemeral key.
pub fn respond<R: CryptoRng + ?Sized>(
    id: &Identity,
    mac_key: &HelloMacKey,
    policy: &DronePolicy,
    boot: u32,
    rng: &mut R,
    hello: &[u8],
) -> Result<(Established, Vec<u8>), Refusal> {
    let (h, noise_msg) = HandshakeHeader::decode(hello).map_err(|e| Refusal {
        error: e.into(),
        alert: None,
    })?;
    if h.msg_type != MsgType::Hello {
        return Err(Refusal {
            error: HandshakeError::Wire(WireError::UnknownType(h.msg_type as u8)),
            alert: None,
        });
    }
    let refuse = |error: HandshakeError, code: AlertCode| Refusal {
        error,
        alert: Some(wire::encode_alert(h.hello_id, code)),
    };
    if h.key_id != receiver_key_id(&id.peer_public) {
        return Err(refuse(
            HandshakeError::Authentication,
            AlertCode::AuthenticationFailed,
        ));
    }
    let parts =
        verify_hello(mac_key, hello).map_err(|e| refuse(e, AlertCode::AuthenticationFailed))?;
    let mut hs = noise::builder(boot_seed(rng, boot))
        .prologue(&prologue(&h.hello_id, &h.key_id, parts.header.time))
        .and_then(|b| b.local_private_key(&id.local.0))
        .and_then(|b| b.remote_public_key(&id.peer_public))
        .and_then(|b| b.build_responder())
        .map_err(|_| refuse(HandshakeError::Noise, AlertCode::InternalError))?;
    let mut payload = Zeroizing::new(vec![0u8; noise_msg.len()]);
    let n = hs.read_message(noise_msg, &mut payload).map_err(|_| {
        refuse(
            HandshakeError::Authentication,
            AlertCode::AuthenticationFailed,
        )
    })?;
    // Parse the offer.
    let bad = |_| refuse(HandshakeError::BadPayload, AlertCode::BadHello);
    let mut r = Reader(&payload[..n]);
    let ns = r.u8().map_err(bad)? as usize;
    let suites = r.bytes(ns).map_err(bad)?;
    let suite = suites
        .iter()
        .filter_map(|b| Suite::from_u8(*b))
        .find(|s| policy.suites.contains(*s))
        .ok_or_else(|| refuse(HandshakeError::NoCommonSuite, AlertCode::NoCommonSuite))?;
    let nm = r.u8().map_err(bad)?;
    let mut chosen: Option<(KexMode, &[u8])> = None;
    for _ in 0..nm {
        let m = r.u8().map_err(bad)?;
        let len = r.u16().map_err(bad)? as usize;
        let share = r.bytes(len).map_err(bad)?;
        let Some(mode) = KexMode::from_u8(m) else {
            continue;
        };
        if len != share_len(mode) {
            return Err(refuse(HandshakeError::BadPayload, AlertCode::BadHello));
        }
        if chosen.is_none() && policy.modes.contains(mode) && RESPONDER_MODES.contains(mode) {
            chosen = Some((mode, share));
        }
    }
    r.end().map_err(bad)?;
    let (mode, share) = chosen
        .ok_or_else(|| refuse(HandshakeError::NoCommonKexMode, AlertCode::NoCommonKexMode))?;
    // The mode's secret and the drone's share.
    #[cfg_attr(
        not(any(feature = "kex-p256", feature = "kex-rsa2048")),
        allow(unused_mut)
    )]
    let mut my_share = Vec::with_capacity(rsa_oaep::MODULUS_LEN);
    let kex_secret: Zeroizing<Vec<u8>> = match mode {
        KexMode::X25519 => Zeroizing::new(Vec::new()),
        #[cfg(feature = "kex-p256")]
        KexMode::P256 => {
            let peer = p256::PublicKey::from_sec1_bytes(share)
                .map_err(|_| refuse(HandshakeError::BadP256Point, AlertCode::BadHello))?;
            let mine = p256::ecdh::EphemeralSecret::generate_from_rng(rng);
            my_share.extend_from_slice(mine.public_key().to_sec1_point(false).as_bytes());
            Zeroizing::new(mine.diffie_hellman(&peer).raw_secret_bytes().to_vec())
        }
        #[cfg(feature = "kex-rsa2048")]
        KexMode::RsaOaep2048 => {
            let n: &[u8; rsa_oaep::MODULUS_LEN] = share
                .try_into()
                .map_err(|_| refuse(HandshakeError::BadPayload, AlertCode::BadHello))?;
            let mut secret = Zeroizing::new(vec![0u8; 32]);
            rng.fill_bytes(&mut secret);
            let mut oaep_seed = [0u8; 32];
            rng.fill_bytes(&mut oaep_seed);
            let ct = rsa_oaep::encrypt(n, &secret, &oaep_seed)
                .map_err(|e| refuse(HandshakeError::Rsa(e), AlertCode::BadHello))?;
            oaep_seed.zeroize();
            my_share.extend_from_slice(&ct);
            secret
        }
        // Not built: never chosen (RESPONDER_MODES), refused like a mode the policy excludes.
        #[cfg(not(all(feature = "kex-p256", feature = "kex-rsa2048")))]
        _ => {
            let _ = share;
            return Err(refuse(
                HandshakeError::NoCommonKexMode,
                AlertCode::NoCommonKexMode,
            ));
        }
    };
    let answer = encode_choice(suite, mode, boot, &my_share);
    let mut msg = vec![0u8; 32 + answer.len() + 16];
    let n = hs
        .write_message(&answer, &mut msg)
        .map_err(|_| refuse(HandshakeError::Noise, AlertCode::InternalError))?;
    msg.truncate(n);
    let secret = split(&mut hs, &kex_secret);
    Ok((
        Established {
            suite,
            mode,
            hello_id: h.hello_id,
            drone_boot: boot,
            secret,
        },
        handshake_message(MsgType::Accept, h.hello_id, h.key_id, &msg),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::TestRng;

    fn mk(id: &Identity) -> HelloMacKey {
        HelloMacKey::derive(&id.local, &id.peer_public)
    }

    fn no_rsa(_: &[u8]) -> Result<Zeroizing<Vec<u8>>, HandshakeError> {
        Err(HandshakeError::RsaKeyMissing)
    }

    fn run(
        offer: &Offer<'_>,
        policy: &DronePolicy,
        seed: u64,
    ) -> Result<(Established, Established), HandshakeError> {
        let mut rng = TestRng::new(seed);
        let (d, r) = pair(&mut rng);
        let (mut rh, hello) = ReceiverHandshake::start(&r, 1, offer, &mut rng)?;
        let (de, accept) =
            respond(&d, &mk(&d), policy, 1, &mut rng, &hello).map_err(|e| e.error)?;
        let key = crate::rsa_oaep::tests::test_key();
        let mut dec = |ct: &[u8]| -> Result<Zeroizing<Vec<u8>>, HandshakeError> {
            key.decrypt(&mut TestRng::new(99), ct)
                .map_err(HandshakeError::Rsa)
        };
        let re = rh.finish(&accept, &mut dec)?;
        Ok((de, re))
    }

    #[test]
    fn every_mode_and_suite_agrees() {
        let n = *crate::rsa_oaep::tests::test_key().modulus();
        for mode in KexMode::ALL {
            for suite in Suite::ALL {
                let offer = Offer {
                    suites: &[suite],
                    modes: &[mode],
                    rsa_modulus: Some(&n),
                };
                let policy = DronePolicy {
                    suites: SuiteSet::all(),
                    modes: KexSet::all(),
                };
                let (d, r) = run(&offer, &policy, 7).unwrap();
                assert_eq!((d.suite, d.mode), (suite, mode));
                assert_eq!((r.suite, r.mode), (suite, mode));
                assert_eq!(d.secret.bytes(), r.secret.bytes(), "{mode} {suite}");
            }
        }
    }

    #[test]
    fn negotiation_follows_receiver_preference_within_drone_policy() {
        let offer = Offer {
            suites: &[Suite::None, Suite::Aes128Gcm, Suite::ChaCha20Poly1305],
            modes: &[KexMode::P256, KexMode::X25519],
            rsa_modulus: None,
        };
        let (d, _) = run(&offer, &DronePolicy::default(), 1).unwrap();
        assert_eq!((d.suite, d.mode), (Suite::Aes128Gcm, KexMode::P256));
        let only_x = DronePolicy {
            suites: SuiteSet::authenticated(),
            modes: KexSet::empty().with(KexMode::X25519),
        };
        let (d, _) = run(&offer, &only_x, 1).unwrap();
        assert_eq!(d.mode, KexMode::X25519);
        let offer = Offer {
            suites: &[Suite::None],
            modes: &[KexMode::X25519],
            rsa_modulus: None,
        };
        assert_eq!(
            run(&offer, &DronePolicy::default(), 1).unwrap_err(),
            HandshakeError::NoCommonSuite
        );
    }

    #[test]
    fn wrong_pairing_is_refused_on_both_sides() {
        let mut rng = TestRng::new(3);
        let (d, r) = pair(&mut rng);
        let (other_d, other_r) = pair(&mut rng);
        let offer = Offer {
            suites: &Suite::AUTHENTICATED,
            modes: &[KexMode::X25519],
            rsa_modulus: None,
        };
        // A receiver the drone is not paired with: the drone cannot authenticate the HELLO.
        let (_, hello) = ReceiverHandshake::start(&other_r, 1, &offer, &mut rng).unwrap();
        let refusal =
            respond(&d, &mk(&d), &DronePolicy::default(), 1, &mut rng, &hello).unwrap_err();
        assert_eq!(refusal.error, HandshakeError::Authentication);
        let alert = refusal.alert.unwrap();
        assert_eq!(alert[12], AlertCode::AuthenticationFailed as u8);
        // A drone impersonator holding the receiver's public key but another drone key: the
        // receiver's HELLO is encrypted to the real drone key, so the impersonator cannot read it.
        let impostor = Identity {
            local: other_d.local.clone(),
            peer_public: r.local.public(),
        };
        let (mut rh, hello) = ReceiverHandshake::start(&r, 1, &offer, &mut rng).unwrap();
        assert_eq!(
            rh.read_alert(&alert).unwrap_err(),
            HandshakeError::HelloIdMismatch
        );
        assert_eq!(
            respond(
                &impostor,
                &mk(&impostor),
                &DronePolicy::default(),
                1,
                &mut rng,
                &hello
            )
            .unwrap_err()
            .error,
            HandshakeError::Authentication
        );
        // The real drone answers; the receiver accepts only that answer.
        let (_, accept) =
            respond(&d, &mk(&d), &DronePolicy::default(), 1, &mut rng, &hello).unwrap();
        let _ = other_r;
        rh.finish(&accept, &mut no_rsa).unwrap();
    }

    /// The offer travels encrypted and authenticated: any change to HELLO or ACCEPT fails.
    #[test]
    fn tampered_hello_or_accept_fails() {
        let mut rng = TestRng::new(4);
        let (d, r) = pair(&mut rng);
        // X25519 only: every byte of the messages is tried, so keep them short (the P-256 share
        // is covered by the session tests' negotiation and by the same Noise AEAD).
        let offer = Offer {
            suites: &Suite::AUTHENTICATED,
            modes: &[KexMode::X25519],
            rsa_modulus: None,
        };
        let (_, hello) = ReceiverHandshake::start(&r, 1, &offer, &mut rng).unwrap();
        for i in 0..hello.len() {
            let mut h = hello.clone();
            h[i] ^= 0x01;
            assert!(
                respond(&d, &mk(&d), &DronePolicy::default(), 1, &mut rng, &h).is_err(),
                "HELLO byte {i}"
            );
        }
        // Same seeds give the same HELLO/ACCEPT, so each flipped byte is tried on a fresh state.
        let fresh = || {
            let (rh, hello) =
                ReceiverHandshake::start(&r, 1, &offer, &mut TestRng::new(40)).unwrap();
            let (_, accept) = respond(
                &d,
                &mk(&d),
                &DronePolicy::default(),
                1,
                &mut TestRng::new(41),
                &hello,
            )
            .unwrap();
            (rh, accept)
        };
        let len = fresh().1.len();
        for i in 0..len {
            let (mut rh, mut accept) = fresh();
            accept[i] ^= 0x01;
            assert!(rh.finish(&accept, &mut no_rsa).is_err(), "ACCEPT byte {i}");
        }
        let (mut rh, accept) = fresh();
        rh.finish(&accept, &mut no_rsa).unwrap();
    }

    #[test]
    fn pairing_text_round_trip() {
        let mut rng = TestRng::new(5);
        let (d, r) = pair(&mut rng);
        let text = d.to_pairing_text(Role::Drone);
        let (role, d2) = Identity::from_pairing_text(&text).unwrap();
        assert_eq!(role, Role::Drone);
        assert_eq!(d2.local.to_bytes(), d.local.to_bytes());
        assert_eq!(d2.peer_public, r.local.public());
        let bad = text.replace("role=drone", "role=pilot");
        assert_eq!(
            Identity::from_pairing_text(&bad).unwrap_err(),
            PairingError::BadRole
        );
        let bad = text.replace("peer_public=", "peer_public=zz");
        assert!(Identity::from_pairing_text(&bad).is_err());
        // A secret that no longer matches its public key is said so (not "not 64 hex digits").
        let secret = text
            .lines()
            .find_map(|l| l.strip_prefix("local_secret="))
            .unwrap();
        let other = alloc::format!("{:0>64}", "1");
        let bad = text.replace(secret, &other);
        let e = Identity::from_pairing_text(&bad).unwrap_err();
        assert_eq!(e, PairingError::SecretMismatch);
        assert!(alloc::format!("{e}").contains("does not belong to its `local_public`"));
    }

    /// Every watch-only pattern of a 3-receiver drone file survives its text, in the receivers'
    /// order; a receiver's file never takes a `watcher_public=` line as its peer; a watch-only bit
    /// beyond the receivers is refused.
    #[test]
    fn watch_only_receivers_round_trip() {
        let mut rng = TestRng::new(9);
        let (mut d, _) = pair_group(&mut rng, 3);
        for mask in 0..8u16 {
            d.watch_only = mask;
            let text = d.to_pairing_text();
            assert_eq!(
                text.matches("watcher_public=").count(),
                mask.count_ones() as usize
            );
            let d2 = DroneIdentity::from_pairing_text(&text).unwrap();
            assert_eq!(
                (d2.receivers.clone(), d2.watch_only),
                (d.receivers.clone(), mask)
            );
            for i in 0..4 {
                assert_eq!(d2.may_steer(i), i < 3 && mask >> i & 1 == 0);
            }
        }
        d.watch_only = 0b1000;
        assert_eq!(d.check(), Err(PairingError::WatcherBeyondReceivers));
        let one = Identity {
            local: StaticSecret::generate(&mut rng),
            peer_public: d.local.public(),
        }
        .to_pairing_text(Role::Receiver)
        .replace("peer_public=", "watcher_public=");
        assert_eq!(
            Identity::from_pairing_text(&one).unwrap_err(),
            PairingError::MissingField("peer_public")
        );
    }

    #[test]
    fn group_pairing_text_round_trip_and_checks() {
        let mut rng = TestRng::new(6);
        let (d, rs) = pair_group(&mut rng, 3);
        assert_eq!(d.receivers.len(), 3);
        let text = d.to_pairing_text();
        assert_eq!(text.matches("peer_public=").count(), 3);
        let d2 = DroneIdentity::from_pairing_text(&text).unwrap();
        assert_eq!(d2.receivers, d.receivers);
        // A single-receiver reader refuses a group file rather than silently using one receiver.
        assert_eq!(
            Identity::from_pairing_text(&text).unwrap_err(),
            PairingError::ReceiverCount(3)
        );
        for (i, r) in rs.iter().enumerate() {
            assert_eq!(r.peer_public, d.local.public());
            let kid = receiver_key_id(&r.local.public());
            assert_eq!(d.receiver_index(&kid), Some(i));
            let text = r.to_pairing_text(Role::Receiver);
            assert_eq!(
                Identity::from_pairing_text(&text).unwrap().0,
                Role::Receiver
            );
        }
        let dup = DroneIdentity {
            local: d.local.clone(),
            receivers: alloc::vec![d.receivers[0], d.receivers[0]],
            watch_only: 0,
        };
        assert_eq!(dup.check(), Err(PairingError::DuplicateReceiver));
        let one: DroneIdentity = rs[0].clone().into();
        assert_eq!(one.receivers.len(), 1);
        assert!(DroneIdentity::from_pairing_text(&rs[0].to_pairing_text(Role::Receiver)).is_err());
    }

    /// A HELLO whose key id names another receiver is refused before any Diffie-Hellman, and the
    /// key id cannot be changed unnoticed (it is in the prologue).
    #[test]
    fn key_id_selects_the_receiver_and_is_bound() {
        let mut rng = TestRng::new(7);
        let (d, rs) = pair_group(&mut rng, 2);
        let offer = Offer {
            suites: &Suite::AUTHENTICATED,
            modes: &[KexMode::X25519],
            rsa_modulus: None,
        };
        let (_, hello) = ReceiverHandshake::start(&rs[1], 1, &offer, &mut rng).unwrap();
        let (_, kid) = hello_ids(&hello).unwrap();
        assert_eq!(d.receiver_index(&kid), Some(1));
        let as0 = d.for_receiver(0).unwrap();
        assert_eq!(
            respond(
                &as0,
                &mk(&as0),
                &DronePolicy::default(),
                1,
                &mut rng,
                &hello
            )
            .unwrap_err()
            .error,
            HandshakeError::Authentication
        );
        let as1 = d.for_receiver(1).unwrap();
        respond(
            &as1,
            &mk(&as1),
            &DronePolicy::default(),
            1,
            &mut rng,
            &hello,
        )
        .unwrap();
        // Receiver 1's HELLO relabelled as receiver 0's: the drone uses key 0 and fails.
        let mut forged = hello.clone();
        forged[12..16].copy_from_slice(&receiver_key_id(&d.receivers[0]));
        assert_eq!(
            respond(
                &as0,
                &mk(&as0),
                &DronePolicy::default(),
                1,
                &mut rng,
                &forged
            )
            .unwrap_err()
            .error,
            HandshakeError::Authentication
        );
    }
}
