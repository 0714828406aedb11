//! The second security review's attacks on the sessions (docs/protocol.md §13), one test each,
//! named after the attack. Each was run on the code before its fix and failed there.
//!
//! The attacker holds no key: it reads every message, records and replays them, races the drone's
//! answers and makes up bytes.

use super::*;

/// An ACCEPT made up by the attacker for `hello`: the HELLO's hello id and key id (plaintext), a
/// Noise message of the right length filled with its own bytes.
fn forged_accept(hello: &[u8], rng: &mut TestRng) -> Vec<u8> {
    let (h, _) = wire::HandshakeHeader::decode(hello).unwrap();
    // X25519 alone: ephemeral 32, choice 8 (suite, mode, boot counter, share length), tag 16.
    let mut noise = vec![0u8; 32 + 8 + 16];
    rand_core::Rng::fill_bytes(rng, &mut noise);
    let mut m = wire::HandshakeHeader {
        msg_type: MsgType::Accept,
        hello_id: h.hello_id,
        key_id: h.key_id,
        noise_len: noise.len() as u16,
    }
    .encode()
    .to_vec();
    m.extend_from_slice(&noise);
    m
}

fn is_accept(m: &[u8]) -> bool {
    m.get(3) == Some(&(MsgType::Accept as u8))
}

/// Attack 2: the attacker answers every HELLO first with a forged ACCEPT (hello id and key id
/// copied from the plaintext header). The receiver must drop what does not authenticate without
/// touching its waiting state, and be established as soon as the drone's real ACCEPT arrives
/// (the black-box figure: within 1 s of it). Before the fix the forged ACCEPT used up the attempt
/// ("AttemptFailed", a backoff growing to 8 s) and the real ACCEPT was then refused as an answer
/// to an earlier HELLO: no session for as long as the race lasted.
#[test]
fn attack2_a_forged_accept_racing_every_hello_does_not_lock_the_receiver_out() {
    let mut n = Net::new(DroneConfig::default(), ReceiverConfig::default(), 200);
    let mut attacker = TestRng::new(201);
    let t0 = n.now.get();
    n.rx.connect(&mut n.rng, &move || t0).unwrap();
    let mut first_real_accept_ns = None;
    let mut established_ns = None;
    let mut forged = 0;
    // 10 ms steps for 20 s of the receiver's timers; every HELLO is raced.
    for _ in 0..2_000 {
        while let Some(m) = n.rx.poll_transmit() {
            if m[3] != MsgType::Hello as u8 {
                let now = n.now.get();
                let _ = n
                    .drone
                    .handle_message(&mut Sequential, &mut n.rng, &move || now, &m);
                continue;
            }
            // The attacker's answer comes first (several forgeries, even), the drone's 2 ms later.
            for _ in 0..3 {
                let r = n.deliver(forged_accept(&m, &mut attacker));
                forged += 1;
                assert!(
                    !matches!(r, Ok(Some(ReceiverEvent::AttemptFailed { .. }))),
                    "a forged ACCEPT ended the attempt: {r:?}"
                );
            }
            n.advance(2_000_000);
            let now = n.now.get();
            let _ = n
                .drone
                .handle_message(&mut Sequential, &mut n.rng, &move || now, &m);
            first_real_accept_ns.get_or_insert(now);
            n.pump();
        }
        if n.rx.is_established() {
            established_ns = Some(n.now.get());
            break;
        }
        n.advance(10_000_000);
        let now = n.now.get();
        let _ =
            n.rx.handle_timeout(&mut Sequential, &mut n.rng, &move || now);
    }
    let (Some(real), Some(done)) = (first_real_accept_ns, established_ns) else {
        panic!(
            "not established after 20 s of racing ({forged} forged ACCEPTs, counters {:?})",
            n.rx.counters()
        );
    };
    assert!(
        done - real < 1_000_000_000,
        "established {} ms after the real ACCEPT",
        (done - real) / 1_000_000
    );
    // Frames flow.
    let m = n.frame(&pixels(8, 1));
    n.deliver_frame(m).unwrap();
}

/// Attack 3, the cost: the attacker alternates two recorded HELLOs of a live receiver, 100 a
/// second for 10 s, while frames flow. No replay gets an ACCEPT or costs the drone a responder
/// handshake, and the live receiver loses no frame. Before the fix the older HELLO was answered
/// every time (a full responder handshake each, ~19 M instructions on the GAP8).
#[test]
fn attack3_replayed_hellos_get_no_accept_and_cost_no_responder_handshake() {
    let mut g = Group::new(1, DroneConfig::default(), 210);
    g.connect(0);
    // The attacker records two HELLOs of the receiver (two reconnects); a third reconnect is the
    // live session.
    let mut recorded = Vec::new();
    for _ in 0..3 {
        g.tick(1_100_000_000);
        let c = g.clock();
        g.rxs[0].connect(&mut g.rng, &c).unwrap();
        let h = g.rxs[0].poll_transmit().unwrap();
        g.drone
            .handle_message(&mut Sequential, &mut g.rng, &c, &h)
            .unwrap();
        g.pump();
        assert!(g.rxs[0].is_established());
        recorded.push(h);
    }
    let (h1, h2) = (recorded[0].clone(), recorded[1].clone());
    let handshakes = g.drone.counters().handshakes;
    assert_eq!(g.drone.counters().responder_handshakes, 4);
    let replayed: [[u8; 8]; 2] = [h1[4..12].try_into().unwrap(), h2[4..12].try_into().unwrap()];
    let mut accepts = 0;
    let mut frames = 0u64;
    for k in 0..1_000u32 {
        // 10 ms: one replay; a frame every third step (33 frames a second); timers.
        g.now.set(g.now.get() + 10_000_000);
        let c = g.clock();
        let replay = if k % 2 == 0 { &h1 } else { &h2 };
        let _ = g
            .drone
            .handle_message(&mut Sequential, &mut g.rng, &c, replay);
        while let Some(m) = g.drone.poll_transmit() {
            if is_accept(&m) && replayed.iter().any(|id| m[4..12] == id[..]) {
                accepts += 1;
            }
            for i in 0..g.rxs.len() {
                let _ = g.rxs[i].handle_message(&mut Sequential, &mut g.rng, &c, m.clone());
            }
        }
        if k % 3 == 0 {
            let px = pixels(8, k as u8);
            let m = g.frame(&px).unwrap();
            assert_eq!(g.open(0, &m).unwrap(), px, "frame {frames}");
            frames += 1;
        }
        g.tick(0);
    }
    assert_eq!(accepts, 0, "ACCEPTs for replayed HELLOs");
    assert_eq!(
        g.drone.counters().handshakes - handshakes,
        0,
        "responder handshakes for replayed HELLOs"
    );
    assert!(g.rxs[0].is_established());
    assert_eq!(g.rxs[0].counters().lost_frames, 0);
    assert_eq!(g.rxs[0].counters().frames, frames);
    // Each replay cost an HMAC and was dropped without an answer.
    let c = g.drone.counters();
    assert_eq!((c.hellos_replayed, c.responder_handshakes), (1_000, 4));
}

/// Attack 3, the eviction: a HELLO the receiver sent earlier (withheld by the attacker) lands
/// between the drone's ACCEPT of the receiver's newer HELLO and the receiver's KEY_ACK. Before
/// the fix it replaced the new, unconfirmed session: the receiver believed it was established and
/// its KEY_ACK met `UnknownSession`; nothing was ever sealed.
#[test]
fn attack3_a_replayed_hello_between_accept_and_key_ack_does_not_evict_the_new_session() {
    let mut g = Group::new(1, DroneConfig::default(), 220);
    let c = g.clock();
    g.rxs[0].connect(&mut g.rng, &c).unwrap();
    let withheld = g.rxs[0].poll_transmit().unwrap();
    // No answer: the receiver sends a fresh HELLO after its handshake timeout.
    g.now.set(g.now.get() + 2_000_000_000);
    let c = g.clock();
    assert!(matches!(
        g.rxs[0].handle_timeout(&mut Sequential, &mut g.rng, &c),
        Some(ReceiverEvent::HandshakeRetry { .. })
    ));
    let hello = g.rxs[0].poll_transmit().unwrap();
    g.drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &hello)
        .unwrap();
    let to_receiver: Vec<Vec<u8>> = core::iter::from_fn(|| g.drone.poll_transmit()).collect();
    // The old HELLO arrives now.
    let _ = g
        .drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &withheld);
    while g.drone.poll_transmit().is_some() {}
    for m in to_receiver {
        g.deliver(0, m).unwrap();
    }
    assert!(g.rxs[0].is_established());
    let key_ack = g.rxs[0].poll_transmit().unwrap();
    let r = g
        .drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &key_ack);
    assert!(
        matches!(r, Ok(Some(DroneEvent::KeyAcked { .. }))),
        "the receiver's KEY_ACK: {r:?}"
    );
    let px = pixels(8, 3);
    let m = g.frame(&px).unwrap();
    assert_eq!(g.open(0, &m).unwrap(), px);
}

/// Attack 3, the rule behind it: a new session that is not confirmed yet never evicts another
/// session of the same receiver. Two processes share one receiver's pairing file; the first one's
/// ACCEPT is delayed, the second connects a second later. The first one's KEY_ACK still finds its
/// session (and confirms it).
#[test]
fn attack3_a_new_unconfirmed_session_never_evicts_another() {
    let mut g = Group::new(1, DroneConfig::default(), 225);
    let id = rx_identity(&g.rxs[0]);
    let mut second = ReceiverSession::new(id, ReceiverConfig::default());
    let c = g.clock();
    g.rxs[0].connect(&mut g.rng, &c).unwrap();
    let hello = g.rxs[0].poll_transmit().unwrap();
    g.drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &hello)
        .unwrap();
    let delayed: Vec<Vec<u8>> = core::iter::from_fn(|| g.drone.poll_transmit()).collect();
    g.now.set(g.now.get() + 1_100_000_000);
    let c = g.clock();
    second.connect(&mut g.rng, &c).unwrap();
    let hello2 = second.poll_transmit().unwrap();
    let r = g
        .drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &hello2);
    assert!(
        matches!(r, Ok(Some(DroneEvent::Established { .. }))),
        "{r:?}"
    );
    while g.drone.poll_transmit().is_some() {}
    for m in delayed {
        g.deliver(0, m).unwrap();
    }
    let key_ack = g.rxs[0].poll_transmit().unwrap();
    let r = g
        .drone
        .handle_message(&mut Sequential, &mut g.rng, &c, &key_ack);
    assert!(
        matches!(r, Ok(Some(DroneEvent::KeyAcked { .. }))),
        "the first process's KEY_ACK: {r:?}"
    );
    // Confirmed: it is the receiver's session now, the other candidate is gone.
    assert_eq!(g.drone.sessions().count(), 1);
    let px = pixels(8, 4);
    let m = g.frame(&px).unwrap();
    assert_eq!(g.open(0, &m).unwrap(), px);
}

/// Attack 3, the rate: a reconnect storm of one receiver (a fresh HELLO every 100 ms for 5 s)
/// costs the drone at most one responder handshake per receiver key and second, and another
/// receiver's HELLO in the middle of it is answered at once. Before the fix every HELLO was
/// answered (50 responder handshakes).
#[test]
fn attack3_responder_handshakes_are_rate_limited_per_receiver_key() {
    let mut g = Group::new(2, DroneConfig::default(), 230);
    let start = g.drone.counters().handshakes;
    let t_start = g.now.get();
    let mut answered = 0;
    for k in 0..50 {
        let c = g.clock();
        g.rxs[0].connect(&mut g.rng, &c).unwrap();
        let hello = g.rxs[0].poll_transmit().unwrap();
        g.drone
            .handle_message(&mut Sequential, &mut g.rng, &c, &hello)
            .unwrap();
        while let Some(m) = g.drone.poll_transmit() {
            answered += usize::from(is_accept(&m));
        }
        if k == 25 {
            g.connect(1);
        }
        g.now.set(g.now.get() + 100_000_000);
    }
    let seconds = (g.now.get() - t_start).div_ceil(1_000_000_000);
    let handshakes = g.drone.counters().handshakes - start;
    // Receiver 1's one handshake, and at most one a second for receiver 0.
    assert!(
        answered as u64 <= seconds && handshakes <= seconds + 1,
        "{answered} ACCEPTs, {handshakes} responder handshakes in {seconds} s"
    );
    assert!(g.rxs[1].is_established());
    // When the storm is over, receiver 0 gets its session.
    g.tick(1_000_000_000);
    g.connect(0);
    let px = pixels(8, 5);
    let m = g.frame(&px).unwrap();
    assert_eq!(g.open(0, &m).unwrap(), px);
    assert_eq!(g.open(1, &m).unwrap(), px);
}

/// Attack 5: with a drone policy that allows every suite, a replayed old HELLO that offered only
/// the unauthenticated ChaCha20, arriving while the group is empty, must not decide the group's
/// suite: a receiver that then joins offering [ChaCha20-Poly1305, ChaCha20 unauthenticated] gets
/// ChaCha20-Poly1305. Tried against the drone that saw the HELLO and against a restarted one (which
/// remembers nothing). Before the fix the replay set the group's suite and the newcomer was given
/// the unauthenticated one.
#[test]
fn attack5_a_replayed_hello_cannot_give_the_group_an_unauthenticated_suite() {
    let permissive = DroneConfig {
        policy: DronePolicy {
            suites: SuiteSet::all(),
            modes: KexSet::all(),
        },
        ..DroneConfig::default()
    };
    for restarted in [false, true] {
        let mut g = Group::new(2, permissive.clone(), 240);
        let ids: Vec<Identity> = g.rxs.iter().map(rx_identity).collect();
        // Receiver 0 once ran unauthenticated (configured so on both ends) and left.
        g.rxs[0] = ReceiverSession::new(
            ids[0].clone(),
            ReceiverConfig {
                suites: vec![Suite::ChaCha20Unauthenticated],
                ..ReceiverConfig::default()
            },
        );
        let c = g.clock();
        g.rxs[0].connect(&mut g.rng, &c).unwrap();
        let old_hello = g.rxs[0].poll_transmit().unwrap();
        g.drone
            .handle_message(&mut Sequential, &mut g.rng, &c, &old_hello)
            .unwrap();
        g.pump();
        assert_eq!(g.rxs[0].suite(), Some(Suite::ChaCha20Unauthenticated));
        g.rxs[0].close(&mut Sequential);
        g.pump();
        assert_eq!(g.drone.members(), 0);
        if restarted {
            g.drone = DroneSession::new(g.drone_identity(), permissive.clone());
        }
        g.tick(2_000_000_000);
        // The replay, while the group is empty.
        let c = g.clock();
        let _ = g
            .drone
            .handle_message(&mut Sequential, &mut g.rng, &c, &old_hello);
        while g.drone.poll_transmit().is_some() {}
        // A receiver that prefers the authenticated suite and would accept the other.
        let both = vec![Suite::ChaCha20Poly1305, Suite::ChaCha20Unauthenticated];
        g.rxs[1] = ReceiverSession::new(
            ids[1].clone(),
            ReceiverConfig {
                suites: both,
                ..ReceiverConfig::default()
            },
        );
        g.connect(1);
        assert_eq!(
            g.rxs[1].suite(),
            Some(Suite::ChaCha20Poly1305),
            "restarted drone: {restarted}"
        );
        let px = pixels(8, 6);
        let m = g.frame(&px).unwrap();
        assert_eq!(
            FrameHeader::decode(&m).unwrap().suite,
            Suite::ChaCha20Poly1305 as u8
        );
        let Ok(Some(ReceiverEvent::Frame(f))) = g.deliver(1, m) else {
            panic!("no frame")
        };
        assert!(f.authenticated);
    }
}
