//! A server a test plays on loopback, and the host's client run against
//! it as a guest's call runs it: on runtimes of their own, so that if the
//! client never returns (a poll computing for minutes, a wait without
//! end) the test fails after a minute instead of hanging, the stuck thread
//! left behind.

use std::future::Future;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Serves the first connection to a loopback port with `script`, and runs
/// `client` with the port: what `client` returns.
pub fn against<S, SF, C, CF, T>(script: S, client: C) -> T
where
    S: FnOnce(TcpStream) -> SF + Send + 'static,
    SF: Future<Output = ()> + Send + 'static,
    C: FnOnce(u16) -> CF + Send + 'static,
    CF: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let server = tokio::runtime::Runtime::new().unwrap();
    let listener = server.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    server.spawn(async move {
        if let Ok((stream, _)) = listener.accept().await {
            // (Each message a script writes goes out at once.)
            let _ = stream.set_nodelay(true);
            script(stream).await;
        }
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (done, out) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let _ = done.send(client(port).await);
    });
    let out = out.recv_timeout(Duration::from_secs(60));
    runtime.shutdown_background();
    server.shutdown_background();
    match out {
        Ok(out) => out,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the client was still running after a minute")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the client panicked"),
    }
}

/// The outbound policy of a component that may reach `scheme` servers
/// on loopback (any port), as a played server is.
pub fn loopback(scheme: &str) -> edge_outbound_http::OutboundPolicy {
    let rule = edge_config::OutboundRule::parse(&format!("{scheme}://127.0.0.1:*")).unwrap();
    edge_outbound_http::OutboundPolicy::new(vec![rule], "t/c").with_addresses(
        edge_outbound_http::AddressPolicy::new(
            vec!["127.0.0.0/8".parse().unwrap()],
            Default::default(),
        ),
    )
}
