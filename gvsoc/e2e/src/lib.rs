//! The end-to-end run of the GAP8 firmware on the GVSOC AI-deck model (`make gvsoc-e2e`): what
//! runs on the host around the simulator.
//!
//! | module | what |
//! |---|---|
//! | [`coded`] | compress, then seal: the files the firmware's cluster JPEG encoder must send (the host's portable encoder, bit-exact with it), decoded by an independent decoder (`jpeg-decoder`) |
//! | [`pgm`] | the input frames: distinct seeded 324×244 greyscale PGMs for the Himax camera model |
//! | [`receiver`] | the receiver: connects to the ESP32 stand-in's WiFi side, runs `gapstream_protocol`'s `ReceiverSession` (handshake, decryption, authentication) with timeouts suited to a simulator |
//! | [`report`] | parses the firmware's `FW ...` lines, matches received frames byte for byte against the inputs, prints the breakdown of the paper (F. Barchi et al., PARMA-DITAM 2023) and checks the run's criteria (all frames byte-exact, the pipelined period against the sum of the stages) |
pub mod coded;
pub mod pgm;
pub mod receiver;
pub mod report;
