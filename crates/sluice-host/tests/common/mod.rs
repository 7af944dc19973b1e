//! What the Linux half's tests share: traffic in a host's network namespace.

use sluice_host::sys::NetnsGuard;
use std::io::Read;
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Duration;

/// Runs `f` on a thread inside a network namespace.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let _g = NetnsGuard::enter(Some(&ns)).expect("entering netns");
        f()
    })
}

/// A sink: accepts `conns` connections on `port` and returns the bytes each delivered.
pub fn sink(ns: &str, port: u16, conns: usize) -> JoinHandle<Vec<u64>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = in_netns(ns, move || {
        let l = TcpListener::bind(("0.0.0.0", port)).expect("bind");
        tx.send(()).unwrap();
        let readers: Vec<_> = (0..conns)
            .map(|_| {
                let (mut s, _) = l.accept().expect("accept");
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    let mut n = 0u64;
                    while let Ok(k) = s.read(&mut buf) {
                        if k == 0 {
                            break;
                        }
                        n += k as u64;
                    }
                    n
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    rx.recv_timeout(Duration::from_secs(5)).expect("sink listening");
    h
}
