//! What the host keeps of the answers a tenant's DNS server gives: a
//! tenant owning a domain chooses its names (up to 253 bytes) and answers
//! each with as many records as a message holds, each of which a resolver
//! holding records keeps with a copy of the name.

use edge_outbound_http::TenantOutbound;
use edge_outbound_http::lookup::{self, Resolver};
use hickory_resolver::Hosts;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// Bytes held by every thread of this test.
static HELD: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: System's allocator, with a count beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        HELD.fetch_add(new as isize - layout.size() as isize, Relaxed);
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// A DNS server on loopback answering every A query with as many A records
/// as one message of EDNS's usual 1,232 bytes (the most the resolver reads) holds, each naming the question (a two-byte
/// pointer on the wire), valid for an hour; AAAA queries have none.
fn stuffing_server() -> u16 {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        loop {
            let (n, from) = socket.recv_from(&mut buf).unwrap();
            let query = &buf[..n];
            let mut at = 12;
            while query[at] != 0 {
                at += 1 + query[at] as usize;
            }
            let qtype = u16::from_be_bytes([query[at + 1], query[at + 2]]);
            let question = &query[12..at + 5];
            let records = if qtype == 1 {
                (1232 - 12 - question.len()) / 16
            } else {
                0
            };
            let mut answer = query[..2].to_vec();
            answer.extend_from_slice(&[0x81, 0x80, 0, 1]);
            answer.extend_from_slice(&(records as u16).to_be_bytes());
            answer.extend_from_slice(&[0, 0, 0, 0]);
            answer.extend_from_slice(question);
            for i in 0..records {
                answer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
                answer.extend_from_slice(&3600u32.to_be_bytes());
                answer.extend_from_slice(&[0, 4, 10, 0, (i >> 8) as u8, i as u8]);
            }
            socket.send_to(&answer, from).unwrap();
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_stuffed_answers_take_a_bounded_part_of_the_host() {
    let mut udp = ConnectionConfig::udp();
    udp.port = stuffing_server();
    let config = ResolverConfig::from_parts(
        None,
        Vec::new(),
        vec![NameServerConfig::new(
            "127.0.0.1".parse().unwrap(),
            true,
            vec![udp],
        )],
    );
    let mut options = ResolverOpts::default();
    options.attempts = 2;
    // As a `resolv.conf` without `options edns0` has it: answers of more
    // than 512 bytes are read all the same (EDNS is always asked for).
    options.edns0 = false;
    let resolver = Resolver::new(config, options, Hosts::default());
    let tenant = Arc::new(TenantOutbound::new("t", 16));
    let long = format!("{}.{}.{}", "b".repeat(63), "c".repeat(63), "d".repeat(63));

    // Warm up what any lookup makes once (the resolver's connections).
    let first = lookup::resolve_with(resolver.clone(), tenant.clone(), format!("w.{long}"), 80)
        .await
        .unwrap();
    assert!(first.len() > 1);

    let before = HELD.load(Relaxed);
    let (names, mut most) = (6_000, 0);
    for batch in 0..names / 16 {
        let lookups: Vec<_> = (0..16)
            .map(|i| {
                let name = format!("n{:05}{}.{long}", batch * 16 + i, "a".repeat(50));
                tokio::spawn(lookup::resolve_with(
                    resolver.clone(),
                    tenant.clone(),
                    name,
                    80,
                ))
            })
            .collect();
        for found in lookups {
            let found = found.await.unwrap().unwrap();
            assert!(!found.is_empty());
            most = most.max(found.len());
        }
    }
    let held = HELD.load(Relaxed) - before;
    eprintln!("{names} names of 255 bytes with {most} addresses each: {held} bytes held");
    assert!(most <= lookup::ADDRESSES_PER_NAME, "{most} addresses");
    assert!(
        held < lookup::CACHE_BYTES as isize + (4 << 20),
        "{held} bytes held for {names} answers"
    );
}
