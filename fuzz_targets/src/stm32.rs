//! `stm32_uart`: any bytes on the GAP8's UART → the drone's state path
//! ([`gapstream_drone::state::UartParser`] behind a [`StateTracker`]): what a noisy line, a
//! flight controller of another version or anything on the deck's UART pins can send.
//!
//! Invariants besides "no panic": the parser counts every byte; after a pause of the line a clean
//! message is found whatever came before; the record of any time is one the tracker could have
//! made (a sample it parsed, flagged stale exactly when older than the bound).
use gapstream_drone::state::{
    StateConfig, StateSource, StateTracker, Stm32Time, UartMessage, UartParser, encode_state,
};
use gapstream_protocol::state::StateSample;

struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl StateSource for Bytes<'_> {
    fn next_byte(&mut self) -> Option<(u8, u64)> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        // 115200 baud: ~86.8 µs a byte.
        Some((b, self.at as u64 * 86_806))
    }
}

/// The body of the `stm32_uart` target.
pub fn stm32_uart(data: &[u8]) {
    // The parser alone: counters and the messages it reports.
    let mut p = UartParser::new();
    let mut states = Vec::new();
    for &b in data {
        let mut ev = p.push(b);
        while let Some(e) = ev {
            if let Ok(UartMessage::State(s)) = e {
                states.push(s);
            }
            ev = p.next_event();
        }
    }
    let c = p.counters();
    assert_eq!(c.bytes, data.len() as u64, "every byte counted");
    assert_eq!(c.states, states.len() as u64);

    // After a pause of the line (the flight controller's messages come in bursts), a clean
    // message is found whatever came before.
    let marker = StateSample {
        stm32_us: 0x5EED,
        position_mm: [1, 2, 3],
        ..StateSample::default()
    };
    let msg = encode_state(&marker);
    let mut tail = p.clone();
    tail.flush();
    let mut last = None;
    for &b in msg.iter() {
        let mut ev = tail.push(b);
        while let Some(e) = ev {
            if let Ok(UartMessage::State(s)) = e {
                last = Some(s);
            }
            ev = tail.next_event();
        }
    }
    assert_eq!(
        last,
        Some(marker),
        "a clean message after the input is found"
    );

    // The tracker: records are made of parsed samples.
    let cfg = StateConfig {
        max_age_ns: 12_000_000,
        stm32_time: Stm32Time::Micros,
    };
    let mut t = StateTracker::new(Bytes { data, at: 0 }, cfg);
    t.poll();
    for at in [
        0u64,
        data.len() as u64 * 43_403,
        data.len() as u64 * 86_806 + 20_000_000,
    ] {
        let r = t.record(at);
        if r.is_valid() {
            assert!(states.contains(&r.sample), "a record's sample was parsed");
            let age = (at / 1000).checked_sub(r.arrival_us);
            assert_eq!(r.is_stale(), age.is_none_or(|a| a > 12_000), "stale flag");
        } else {
            assert!(r.sample == StateSample::default());
        }
    }
}

/// Seeds: clean messages, NanoCockpit's other messages, garbage in front, a bad CRC.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let s = |i: i16| StateSample {
        stm32_us: 10_000 * i as u32,
        position_mm: [i, -i, 1000],
        velocity_mm_s: [0, 628, 0],
        accel_mm_s2: [-395, 0, 0],
        quat: 0xC000_0000,
        rates_mrad_s: [0, 0, 628],
    };
    let mut clean = Vec::new();
    for i in 0..4 {
        clean.extend_from_slice(&encode_state(&s(i)));
    }
    let mut others = Vec::new();
    for (h, n) in [(*b"!RNG", 4usize), (*b"!TOF", 68)] {
        let mut m = h.to_vec();
        m.extend((0..n).map(|i| i as u8));
        let c = gapstream_drone::state::crc32(&m);
        m.extend_from_slice(&c.to_le_bytes());
        others.extend(m);
    }
    others.extend_from_slice(&encode_state(&s(5)));
    let mut noisy = b"FW console? !ST!RN".to_vec();
    noisy.extend_from_slice(&clean);
    let mut bad = encode_state(&s(6)).to_vec();
    bad[20] ^= 0x10;
    bad.extend_from_slice(&encode_state(&s(7)));
    vec![
        ("state-messages".into(), clean),
        ("rng-tof-state".into(), others),
        ("noise-then-states".into(), noisy),
        ("bad-crc".into(), bad),
    ]
}
