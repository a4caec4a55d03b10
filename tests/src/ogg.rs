//! Just enough Ogg Opus (RFC 7845) for interoperability tests: write a
//! stream of Opus packets as an `.opus` file libopus tools read, and read
//! the packets back out of one they wrote. Plus 16-bit WAV in and out.

/// Ogg's CRC-32 (polynomial 0x04c11db7, no reflection, no final xor).
fn crc(data: &[u8]) -> u32 {
    let mut crc = 0u32;
    for &b in data {
        crc ^= (b as u32) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04c1_1db7
            } else {
                crc << 1
            };
        }
    }
    crc
}

fn page(out: &mut Vec<u8>, header_type: u8, granule: u64, serial: u32, seq: u32, packet: &[u8]) {
    let mut segments = vec![255u8; packet.len() / 255];
    segments.push((packet.len() % 255) as u8);
    let start = out.len();
    out.extend_from_slice(b"OggS");
    out.push(0);
    out.push(header_type);
    out.extend_from_slice(&granule.to_le_bytes());
    out.extend_from_slice(&serial.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(segments.len() as u8);
    out.extend_from_slice(&segments);
    out.extend_from_slice(packet);
    let c = crc(&out[start..]);
    out[start + 22..start + 26].copy_from_slice(&c.to_le_bytes());
}

/// An Ogg Opus file of mono 48 kHz packets of `frame` samples each, one
/// packet per page (simple, and valid).
pub fn write_opus(packets: &[Vec<u8>], frame: u64) -> Vec<u8> {
    let serial = 0x6564_6765;
    let mut out = Vec::new();
    let mut head = b"OpusHead".to_vec();
    head.extend_from_slice(&[1, 1]); // version, channels
    head.extend_from_slice(&0u16.to_le_bytes()); // pre-skip
    head.extend_from_slice(&48_000u32.to_le_bytes());
    head.extend_from_slice(&0i16.to_le_bytes()); // gain
    head.push(0); // mapping family
    page(&mut out, 0x02, 0, serial, 0, &head);
    let mut tags = b"OpusTags".to_vec();
    tags.extend_from_slice(&4u32.to_le_bytes());
    tags.extend_from_slice(b"edge");
    tags.extend_from_slice(&0u32.to_le_bytes());
    page(&mut out, 0, 0, serial, 1, &tags);
    for (i, p) in packets.iter().enumerate() {
        let last = i + 1 == packets.len();
        page(
            &mut out,
            if last { 0x04 } else { 0 },
            (i as u64 + 1) * frame,
            serial,
            i as u32 + 2,
            p,
        );
    }
    out
}

/// The audio packets of an Ogg Opus file (headers skipped) and its pre-skip.
pub fn read_opus(data: &[u8]) -> (Vec<Vec<u8>>, usize) {
    let mut packets = Vec::new();
    let mut current = Vec::new();
    let mut pos = 0;
    while pos + 27 <= data.len() && &data[pos..pos + 4] == b"OggS" {
        let nseg = data[pos + 26] as usize;
        let table = &data[pos + 27..pos + 27 + nseg];
        let mut body = pos + 27 + nseg;
        for &len in table {
            current.extend_from_slice(&data[body..body + len as usize]);
            body += len as usize;
            if len < 255 {
                packets.push(std::mem::take(&mut current));
            }
        }
        pos = body;
    }
    let pre_skip = u16::from_le_bytes([packets[0][10], packets[0][11]]) as usize;
    (packets.split_off(2), pre_skip)
}

/// A mono 48 kHz 16-bit WAV file.
pub fn write_wav(samples: &[f32]) -> Vec<u8> {
    let data_len = samples.len() as u32 * 2;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&48_000u32.to_le_bytes());
    out.extend_from_slice(&96_000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for s in samples {
        out.extend_from_slice(&((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes());
    }
    out
}

/// The samples of a 16-bit PCM WAV file (first channel).
pub fn read_wav(data: &[u8]) -> Vec<f32> {
    let mut pos = 12;
    let mut channels = 1usize;
    while pos + 8 <= data.len() {
        let id = &data[pos..pos + 4];
        let len = u32::from_le_bytes(data[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if id == b"fmt " {
            channels = u16::from_le_bytes([data[pos + 10], data[pos + 11]]) as usize;
        }
        if id == b"data" {
            let body = &data[pos + 8..(pos + 8 + len).min(data.len())];
            return body
                .chunks_exact(2 * channels)
                .map(|c| i16::from_le_bytes([c[0], c[1]]) as f32 / 32768.0)
                .collect();
        }
        pos += 8 + len + (len & 1);
    }
    Vec::new()
}
