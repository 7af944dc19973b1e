//! What sluice asks of etcd, over etcd's own JSON gateway to its v3 API (`/v3/kv/range`,
//! `/v3/kv/txn`, `/v3/watch`, `/v3/lease/*`, `/v3/auth/authenticate`): reads, a transaction on a
//! key's revision, watches from a revision, leases, and users' tokens. Keys and values are bytes,
//! base64 on the wire; 64-bit numbers are strings. Every request tries the members in turn, so
//! one member down is not noticed.

use anyhow::{anyhow, bail, Context, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to reach etcd, from the command line.
#[derive(Clone, Debug, Default)]
pub struct Connect {
    /// Client URLs of the members, `https://10.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// The CA that signed the members' certificates.
    pub cacert: Option<PathBuf>,
    /// This client's certificate and key, where etcd asks for one.
    pub cert: Option<PathBuf>,
    /// The key of `cert`.
    pub key: Option<PathBuf>,
    /// An etcd user, and the file holding its password.
    pub user: Option<(String, PathBuf)>,
    /// Allow `http://` endpoints: for a test on loopback.
    pub insecure_plaintext: bool,
}

/// One key's value and revisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
    /// The revision that created the key.
    pub create_revision: i64,
    /// The revision of its last change.
    pub mod_revision: i64,
    /// The lease it is attached to, 0 for none.
    pub lease: i64,
}

/// A change a watch saw: the key's new value, or its deletion.
#[derive(Clone, Debug)]
pub enum Event {
    /// Put at `kv.mod_revision`.
    Put(Kv),
    /// Deleted at this revision.
    Delete(String, i64),
}

/// How a watch stream ended.
#[derive(Debug)]
pub enum Watched {
    /// Nothing within the read timeout, or the member closed or broke it: watch again.
    Quiet,
    /// The revisions asked for were compacted away; the oldest kept is this one.
    Compacted(i64),
}

/// A failure etcd itself reported (as opposed to not answering).
#[derive(Debug)]
pub struct EtcdError {
    /// gRPC status code.
    pub code: i64,
    /// etcd's message.
    pub message: String,
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "etcd: {}", self.message)
    }
}

impl std::error::Error for EtcdError {}

impl EtcdError {
    /// Whether etcd refused for lack of a permission.
    pub fn is_permission_denied(&self) -> bool {
        self.message.contains("permission denied")
    }
}

/// No member answered.
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// A client of one etcd cluster; clones share the connection pool and the token.
#[derive(Clone)]
pub struct Etcd {
    endpoints: Arc<Vec<String>>,
    /// Unary calls: a member that does not answer within seconds is passed over.
    agent: ureq::Agent,
    /// Watches: reads wait for changes, up to `WATCH_QUIET`.
    watcher: ureq::Agent,
    user: Option<(String, String)>,
    token: Arc<Mutex<Option<String>>>,
    /// The member that answered last: tried first.
    current: Arc<AtomicUsize>,
}

/// What members say while the cluster changes leader or loses a member: worth asking again.
const TRANSIENT: &[&str] = &["leader changed", "no leader", "request timed out", "too many requests", "not capable", "stopped"];
/// How long such answers are asked again.
const TRANSIENT_RETRY: Duration = Duration::from_secs(6);
/// How long a member may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a unary call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(4);
/// How long a watch waits for a change before it is opened again; also how soon a watch on a
/// member that stopped answering without closing (a partition) moves to another.
pub const WATCH_QUIET: Duration = Duration::from_secs(3);

impl Etcd {
    /// A client for `c`: refuses plain text unless asked, reads the certificates and password.
    pub fn new(c: &Connect) -> Result<Etcd> {
        if c.endpoints.is_empty() {
            bail!("--etcd: expected the client URL of at least one etcd member, as https://10.0.0.1:2379");
        }
        let mut endpoints = Vec::new();
        for url in &c.endpoints {
            let url = url.trim_end_matches('/');
            match url.split_once("://") {
                Some(("https", rest)) if !rest.is_empty() => {}
                Some(("http", rest)) if !rest.is_empty() => {
                    if !c.insecure_plaintext {
                        bail!(
                            "--etcd {url}: refusing a plain-text connection: policy and credentials would cross the network unprotected; \
                             use https:// with --cacert (docs/security.md), or add --insecure-plaintext for a test on loopback"
                        );
                    }
                }
                _ => bail!("--etcd {url}: expected a client URL such as https://10.0.0.1:2379"),
            }
            endpoints.push(url.to_string());
        }
        let tls = tls_config(c)?;
        let build = |read: Duration| {
            let mut b = ureq::AgentBuilder::new().timeout_connect(CONNECT_TIMEOUT).timeout_read(read).timeout_write(CALL_TIMEOUT);
            if let Some(t) = &tls {
                b = b.tls_config(t.clone());
            }
            b.build()
        };
        let user = match &c.user {
            Some((name, file)) => {
                let pw = std::fs::read_to_string(file).with_context(|| format!("--password-file {}: cannot read it", file.display()))?;
                Some((name.clone(), pw.trim_end_matches(['\n', '\r']).to_string()))
            }
            None => None,
        };
        Ok(Etcd {
            endpoints: Arc::new(endpoints),
            agent: build(CALL_TIMEOUT),
            watcher: build(WATCH_QUIET),
            user,
            token: Arc::new(Mutex::new(None)),
            current: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The members' URLs, as given.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Posts `body` to `path` on the first member that answers, as the user if there is one;
    /// an expired token is renewed, and what a member says while the cluster elects a leader or
    /// a member dies mid-answer is asked again (of the next member) for a few seconds.
    fn call(&self, path: &str, body: &Value) -> Result<Value> {
        let deadline = std::time::Instant::now() + TRANSIENT_RETRY;
        loop {
            let answer = self.post(&self.agent, path, body, true).and_then(|r| json_of(r));
            let retry = match &answer {
                Ok(v) => match error_of(v) {
                    None => return answer,
                    Some(e) if e.message.contains("invalid auth token") && self.user.is_some() => {
                        *self.token.lock().unwrap() = None;
                        true
                    }
                    Some(e) if TRANSIENT.iter().any(|t| e.message.contains(t)) => true,
                    Some(e) => return Err(explained(e)),
                },
                Err(e) => e.downcast_ref::<Unreachable>().is_some_and(|u| u.0.starts_with("etcd's answer broke off")),
            };
            if !retry || std::time::Instant::now() > deadline {
                return match answer {
                    Ok(v) => Err(error_of(&v).expect("an error").into()),
                    Err(e) => Err(e),
                };
            }
            let n = self.endpoints.len();
            self.current.store((self.current.load(Ordering::Relaxed) + 1) % n, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The raw response of the first member that answers.
    fn post(&self, agent: &ureq::Agent, path: &str, body: &Value, authed: bool) -> Result<ureq::Response> {
        let n = self.endpoints.len();
        let first = self.current.load(Ordering::Relaxed);
        let mut failures = Vec::new();
        for i in 0..n {
            let at = (first + i) % n;
            let url = format!("{}{path}", self.endpoints[at]);
            let mut req = agent.post(&url).set("Content-Type", "application/json");
            if authed {
                if let Some(t) = self.token_at(agent, at)? {
                    req = req.set("Authorization", &t);
                }
            }
            match req.send_string(&body.to_string()) {
                Ok(r) => {
                    self.current.store(at, Ordering::Relaxed);
                    return Ok(r);
                }
                // etcd's own errors come with a JSON body: the caller reads them.
                Err(ureq::Error::Status(_, r)) => {
                    self.current.store(at, Ordering::Relaxed);
                    return Ok(r);
                }
                Err(ureq::Error::Transport(t)) => {
                    tls_failure(&self.endpoints[at], &t)?;
                    failures.push(format!("{}: {}", self.endpoints[at], t.kind()));
                }
            }
        }
        Err(Unreachable(format!(
            "etcd does not answer ({}); is it running, and are the --etcd URLs its client URLs?",
            failures.join("; ")
        ))
        .into())
    }

    /// The user's token for member `at`, asked for when there is none.
    fn token_at(&self, agent: &ureq::Agent, at: usize) -> Result<Option<String>> {
        let Some((name, pw)) = &self.user else { return Ok(None) };
        if let Some(t) = self.token.lock().unwrap().clone() {
            return Ok(Some(t));
        }
        let url = format!("{}/v3/auth/authenticate", self.endpoints[at]);
        let r = match agent.post(&url).send_string(&json!({ "name": name, "password": pw }).to_string()) {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(ureq::Error::Transport(t)) => {
                tls_failure(&self.endpoints[at], &t)?;
                return Err(Unreachable(format!("etcd does not answer ({}: {})", self.endpoints[at], t.kind())).into());
            }
        };
        let v = json_of(r)?;
        if let Some(e) = error_of(&v) {
            bail!("etcd user {name}: {}; check --user and --password-file", e.message);
        }
        let t = v["token"].as_str().ok_or_else(|| anyhow!("etcd gave user {name} no token: is auth enabled (`etcdctl auth enable`)?"))?;
        *self.token.lock().unwrap() = Some(t.to_string());
        Ok(Some(t.to_string()))
    }

    /// The key's value, now or at `revision`; `None` if it did not exist then.
    pub fn get(&self, key: &str, revision: Option<i64>) -> Result<Option<Kv>> {
        let mut body = json!({ "key": B64.encode(key) });
        if let Some(r) = revision {
            body["revision"] = json!(r.to_string());
        }
        let v = self.call("/v3/kv/range", &body)?;
        v["kvs"].as_array().and_then(|a| a.first()).map(kv_of).transpose()
    }

    /// The key's value now, and the store's revision when read.
    pub fn get_latest(&self, key: &str) -> Result<(Option<Kv>, i64)> {
        let v = self.call("/v3/kv/range", &json!({ "key": B64.encode(key) }))?;
        let kv = v["kvs"].as_array().and_then(|a| a.first()).map(kv_of).transpose()?;
        Ok((kv, num(&v["header"]["revision"])))
    }

    /// Every key under `prefix`, and the store's revision when read.
    pub fn get_prefix(&self, prefix: &str) -> Result<(Vec<Kv>, i64)> {
        let v = self.call("/v3/kv/range", &json!({ "key": B64.encode(prefix), "range_end": B64.encode(prefix_end(prefix)) }))?;
        let kvs = v["kvs"].as_array().map(|a| a.iter().map(kv_of).collect::<Result<Vec<_>>>()).transpose()?.unwrap_or_default();
        Ok((kvs, num(&v["header"]["revision"])))
    }

    /// Puts `value` at `key` if the key's last change is still `mod_revision` (0: the key does
    /// not exist), and `also` beside it; the new revision, or `None` if someone changed it first.
    pub fn put_if_unchanged(&self, key: &str, mod_revision: i64, value: &[u8], also: &[(&str, &[u8])]) -> Result<Option<i64>> {
        let mut puts = vec![json!({ "request_put": { "key": B64.encode(key), "value": B64.encode(value) } })];
        puts.extend(also.iter().map(|(k, v)| json!({ "request_put": { "key": B64.encode(k), "value": B64.encode(v) } })));
        let v = self.call(
            "/v3/kv/txn",
            &json!({
                "compare": [{ "target": "MOD", "key": B64.encode(key), "result": "EQUAL", "mod_revision": mod_revision.to_string() }],
                "success": puts,
            }),
        )?;
        Ok(v["succeeded"].as_bool().unwrap_or(false).then(|| num(&v["header"]["revision"])))
    }

    /// Puts every pair at once, attached to `lease` where it is not 0.
    pub fn put_all(&self, pairs: &[(&str, &[u8], i64)]) -> Result<()> {
        let puts: Vec<Value> = pairs
            .iter()
            .map(|(k, v, lease)| {
                let mut p = json!({ "key": B64.encode(k), "value": B64.encode(v) });
                if *lease != 0 {
                    p["lease"] = json!(lease.to_string());
                }
                json!({ "request_put": p })
            })
            .collect();
        self.call("/v3/kv/txn", &json!({ "success": puts }))?;
        Ok(())
    }

    /// Deletes a key; whether it was there.
    pub fn delete(&self, key: &str) -> Result<bool> {
        let v = self.call("/v3/kv/deleterange", &json!({ "key": B64.encode(key) }))?;
        Ok(num(&v["deleted"]) > 0)
    }

    /// A new lease of `ttl` seconds.
    pub fn lease_grant(&self, ttl: u64) -> Result<i64> {
        let v = self.call("/v3/lease/grant", &json!({ "TTL": ttl.to_string() }))?;
        Ok(num(&v["ID"]))
    }

    /// Renews a lease; its remaining seconds, 0 if it has expired.
    pub fn lease_keepalive(&self, id: i64) -> Result<i64> {
        let v = self.call("/v3/lease/keepalive", &json!({ "ID": id.to_string() }))?;
        Ok(num(&v["result"]["TTL"]))
    }

    /// Ends a lease now, and with it the keys attached.
    pub fn lease_revoke(&self, id: i64) -> Result<()> {
        self.call("/v3/lease/revoke", &json!({ "ID": id.to_string() }))?;
        Ok(())
    }

    /// Watches `key` from `revision` (inclusive), handing each batch of changes to `each` as it
    /// comes, until `WATCH_QUIET` passes without a word (then watch again from the revision after
    /// the last change seen). One stream for many changes: a watch opened anew after other keys
    /// changed starts behind, and etcd catches such watches up only every 100 ms.
    pub fn watch(&self, key: &str, revision: i64, mut each: impl FnMut(Vec<Event>)) -> Result<Watched> {
        let body = json!({ "create_request": { "key": B64.encode(key), "start_revision": revision.to_string() } });
        let r = self.post(&self.watcher, "/v3/watch", &body, true)?;
        let trailer = r.header("Trailer").is_some();
        let mut lines = BufReader::new(r.into_reader().take(1 << 40));
        let mut line = String::new();
        loop {
            line.clear();
            let ended = match lines.read_line(&mut line) {
                Ok(0) => return Ok(Watched::Quiet),
                Ok(_) => false,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => return Ok(Watched::Quiet),
                // The last line before a trailer the decoder cannot read is whole: read it, then stop.
                Err(e) if trailer && is_trailer_error(&e) && !line.trim().is_empty() => true,
                // The stream broke (its member died): watched again from the next revision, on
                // the next member that answers; only no member answering is `Unreachable`.
                Err(_) => return Ok(Watched::Quiet),
            };
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&line).context("etcd's watch sent something that is not JSON")?;
            if let Some(e) = error_of(&v).or_else(|| error_of(&v["error"])) {
                return Err(explained(e));
            }
            let result = &v["result"];
            // etcd cancels a watch it may not serve (no user, no permission) and keeps the stream open.
            if result["canceled"].as_bool() == Some(true) {
                let reason = result["cancel_reason"].as_str().unwrap_or("the watch was cancelled");
                return Err(explained(EtcdError { code: 0, message: grpc_message(reason).to_string() }));
            }
            let compacted = num(&result["compact_revision"]);
            if compacted > 0 {
                return Ok(Watched::Compacted(compacted));
            }
            if let Some(events) = result["events"].as_array() {
                let mut out = Vec::new();
                for e in events {
                    let kv = kv_of(&e["kv"])?;
                    out.push(if e["type"].as_str() == Some("DELETE") { Event::Delete(kv.key, kv.mod_revision) } else { Event::Put(kv) });
                }
                if !out.is_empty() {
                    each(out);
                }
            }
            if ended {
                return Ok(Watched::Quiet);
            }
        }
    }
}

/// A TLS failure towards `endpoint`, said with what to check; other transport failures pass.
fn tls_failure(endpoint: &str, t: &ureq::Transport) -> Result<()> {
    let text = t.to_string();
    if text.contains("certificate") || text.contains("Certificate") || text.contains("handshake") {
        bail!(
            "etcd at {endpoint}: TLS failed ({text}); check that --cacert signed the member's certificate, that the URL's host \
             is one the certificate names, and that --cert/--key are a pair the cluster's CA signed"
        );
    }
    Ok(())
}

/// etcd's error with what to do about it, where sluice knows.
fn explained(e: EtcdError) -> anyhow::Error {
    if e.message.contains("user name is empty") {
        return anyhow!("{e}: etcd has authentication on; give --user NAME and --password-file FILE (docs/security.md)");
    }
    e.into()
}

/// The message of a gRPC status as the gateway writes it (`rpc error: code = X desc = etcdserver: M`): `M`.
fn grpc_message(reason: &str) -> &str {
    let m = reason.split_once("desc = ").map_or(reason, |(_, m)| m);
    m.trim_start_matches("etcdserver: ")
}

/// The chunked decoder's failure on a trailer (etcd's gateway ends its error replies with
/// `Grpc-Trailer-Content-Type`), which ureq's decoder does not read; the body before it is whole.
fn is_trailer_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::InvalidInput && e.to_string().contains("decoding chunks")
}

/// The TLS settings of `c`: its CA and client certificate; none for plain text.
fn tls_config(c: &Connect) -> Result<Option<Arc<rustls::ClientConfig>>> {
    if c.endpoints.iter().all(|u| u.starts_with("http://")) {
        return Ok(None);
    }
    let pem = |flag: &str, p: &PathBuf| -> Result<Vec<u8>> { std::fs::read(p).with_context(|| format!("{flag} {}: cannot read it", p.display())) };
    let mut roots = rustls::RootCertStore::empty();
    match &c.cacert {
        Some(p) => {
            let certs = rustls_pemfile::certs(&mut pem("--cacert", p)?.as_slice()).collect::<std::result::Result<Vec<_>, _>>()
                .with_context(|| format!("--cacert {}: expected PEM certificates", p.display()))?;
            if certs.is_empty() {
                bail!("--cacert {}: no PEM certificate in it", p.display());
            }
            for cert in certs {
                roots.add(cert).with_context(|| format!("--cacert {}: not a CA certificate rustls accepts", p.display()))?;
            }
        }
        None => bail!("--etcd https://...: expected --cacert FILE, the CA that signed the etcd members' certificates"),
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let config = match (&c.cert, &c.key) {
        (Some(cert), Some(key)) => {
            let chain = rustls_pemfile::certs(&mut pem("--cert", cert)?.as_slice()).collect::<std::result::Result<Vec<_>, _>>()
                .with_context(|| format!("--cert {}: expected a PEM certificate", cert.display()))?;
            let k = rustls_pemfile::private_key(&mut pem("--key", key)?.as_slice())
                .with_context(|| format!("--key {}: expected a PEM private key", key.display()))?
                .ok_or_else(|| anyhow!("--key {}: no PEM private key in it", key.display()))?;
            builder.with_client_auth_cert(chain, k).with_context(|| format!("--cert {} and --key {} are not a pair", cert.display(), key.display()))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => bail!("--cert and --key go together: the client certificate and its key"),
    };
    Ok(Some(Arc::new(config)))
}

/// A response's JSON; an answer cut short is `Unreachable` (asked again), one that is not JSON
/// is shown as etcd wrote it.
fn json_of(r: ureq::Response) -> Result<Value> {
    let url = r.get_url().to_string();
    let trailer = r.header("Trailer").is_some();
    let mut body = Vec::new();
    if let Err(e) = r.into_reader().take(64 << 20).read_to_end(&mut body) {
        // A body followed by a trailer ureq cannot decode is whole when it is JSON; anything else
        // was cut short.
        let whole = trailer && is_trailer_error(&e) && serde_json::from_slice::<Value>(&body).is_ok();
        if !whole {
            return Err(Unreachable(format!("etcd's answer broke off ({e})")).into());
        }
    }
    let text = String::from_utf8_lossy(&body);
    serde_json::from_str(&text).map_err(|_| {
        let hint = if text.contains("CommonName") {
            "; etcd's JSON gateway takes no client certificate under --client-cert-auth: run etcd with TLS and users and roles instead (docs/security.md)"
        } else {
            ""
        };
        anyhow!("etcd at {url} answered {:?}{hint}", text.trim())
    })
}

/// etcd's error in a response, if it is one.
fn error_of(v: &Value) -> Option<EtcdError> {
    let message = v.get("error").and_then(Value::as_str).or_else(|| v.get("message").and_then(Value::as_str))?;
    Some(EtcdError { code: v["code"].as_i64().unwrap_or(0), message: message.trim_start_matches("etcdserver: ").to_string() })
}

/// A 64-bit number as the gateway writes it (a string), 0 where absent.
fn num(v: &Value) -> i64 {
    v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64()).unwrap_or(0)
}

fn kv_of(v: &Value) -> Result<Kv> {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        key: String,
        #[serde(default)]
        value: String,
    }
    let raw: Raw = serde_json::from_value(v.clone())?;
    let key = String::from_utf8(B64.decode(raw.key)?).context("etcd key is not UTF-8")?;
    Ok(Kv {
        key,
        value: B64.decode(raw.value)?,
        create_revision: num(&v["create_revision"]),
        mod_revision: num(&v["mod_revision"]),
        lease: num(&v["lease"]),
    })
}

/// The end of the range of keys that start with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_refused_unless_asked() {
        let c = Connect { endpoints: vec!["http://127.0.0.1:2379".into()], ..Connect::default() };
        let e = Etcd::new(&c).err().unwrap().to_string();
        assert!(e.starts_with("--etcd http://127.0.0.1:2379: refusing a plain-text connection") && e.contains("--insecure-plaintext"), "{e}");
        Etcd::new(&Connect { insecure_plaintext: true, ..c }).unwrap();
        let e = Etcd::new(&Connect { endpoints: vec!["127.0.0.1:2379".into()], ..Connect::default() }).err().unwrap().to_string();
        assert!(e.contains("expected a client URL such as https://"), "{e}");
        let e = Etcd::new(&Connect { endpoints: vec!["https://127.0.0.1:2379".into()], ..Connect::default() }).err().unwrap().to_string();
        assert!(e.contains("expected --cacert FILE"), "{e}");
    }

    /// A stand-in for etcd's plain-HTTP gateway on loopback: each request, in order, gets the
    /// next of `bodies` as a chunked reply of `status`, ending in the trailer etcd 3.4 sends
    /// with its errors when `trailer`; its URL.
    fn gateway(replies: Vec<(u16, &'static str, bool)>) -> String {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            let mut replies = replies.into_iter();
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                // One request per connection: its head, then its body.
                let mut length = 0;
                let mut line = String::new();
                while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap();
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                r.read_exact(&mut body).unwrap();
                let Some((status, body, trailer)) = replies.next() else { return };
                let mut out = format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nConnection: close\r\n");
                if trailer {
                    out.push_str("Trailer: Grpc-Trailer-Content-Type\r\n");
                }
                out.push_str(&format!("Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n", body.len()));
                if trailer {
                    out.push_str("Grpc-Trailer-Content-Type: application/grpc\r\n");
                }
                out.push_str("\r\n");
                let _ = conn.write_all(out.as_bytes());
            }
        });
        url
    }

    fn plain(url: &str, user: Option<(String, PathBuf)>) -> Etcd {
        Etcd::new(&Connect { endpoints: vec![url.into()], insecure_plaintext: true, user, ..Connect::default() }).unwrap()
    }

    /// etcd 3.4's plain-HTTP gateway ends each error reply in a trailer: the error is read and
    /// said as over TLS, not taken for an answer that broke off.
    #[test]
    fn errors_ending_in_a_trailer_are_read() {
        let empty = r#"{"error":"etcdserver: user name is empty","message":"etcdserver: user name is empty","code":3}"#;
        let e = plain(&gateway(vec![(400, empty, true)]), None).get("/sluice/policy", None).unwrap_err().to_string();
        assert_eq!(e, "etcd: user name is empty: etcd has authentication on; give --user NAME and --password-file FILE (docs/security.md)");

        let failed = r#"{"error":"etcdserver: authentication failed, invalid user ID or password","message":"etcdserver: authentication failed, invalid user ID or password","code":3}"#;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pw"), "nope\n").unwrap();
        let e = plain(&gateway(vec![(400, failed, true)]), Some(("wrong".into(), dir.path().join("pw")))).get("/k", None).unwrap_err().to_string();
        assert_eq!(e, "etcd user wrong: authentication failed, invalid user ID or password; check --user and --password-file");

        let denied = r#"{"error":"etcdserver: permission denied","message":"etcdserver: permission denied","code":7}"#;
        let e = plain(&gateway(vec![(403, denied, true)]), None).delete("/sluice/policy").unwrap_err();
        assert!(e.downcast_ref::<EtcdError>().is_some_and(EtcdError::is_permission_denied), "{e:#}");

        // A whole answer without a trailer reads as before.
        let found = r#"{"header":{"revision":"7"},"kvs":[{"key":"L2s=","value":"dg==","mod_revision":"7","create_revision":"3"}]}"#;
        let (kv, rev) = plain(&gateway(vec![(200, found, false)]), None).get_latest("/k").unwrap();
        assert_eq!((kv.unwrap().value, rev), (b"v".to_vec(), 7));
    }

    /// A watch etcd may not serve is cancelled with a reason while the stream stays open: the
    /// reason is the watch's error at once, not a quiet stream.
    #[test]
    fn a_cancelled_watch_says_why() {
        let cancelled = r#"{"result":{"header":{"revision":"1"},"watch_id":"-1","created":true,"canceled":true,"cancel_reason":"rpc error: code = InvalidArgument desc = etcdserver: user name is empty"}}"#;
        let t = std::time::Instant::now();
        let e = plain(&gateway(vec![(200, cancelled, false)]), None).watch("/sluice/policy", 1, |_| panic!("no events")).unwrap_err().to_string();
        assert!(e.starts_with("etcd: user name is empty: etcd has authentication on; give --user"), "{e}");
        assert!(t.elapsed() < WATCH_QUIET, "the cancellation was read at once");
        let denied = r#"{"result":{"header":{"revision":"1"},"watch_id":"-1","created":true,"canceled":true,"cancel_reason":"rpc error: code = PermissionDenied desc = etcdserver: permission denied"}}"#;
        let e = plain(&gateway(vec![(200, denied, false)]), None).watch("/sluice/policy", 1, |_| ()).unwrap_err();
        assert!(e.downcast_ref::<EtcdError>().is_some_and(EtcdError::is_permission_denied), "{e:#}");
    }

    #[test]
    fn a_prefix_range_ends_after_its_last_key() {
        assert_eq!(prefix_end("/sluice/hosts/"), b"/sluice/hosts0");
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80");
    }
}
