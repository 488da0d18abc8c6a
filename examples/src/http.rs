//! A small HTTP/1.1 file server with keep-alive, the NSPR experiment's server: one actor per
//! connection on threadlet, or one OS thread per connection (the pthreads baseline). Requests
//! are parsed with `httparse`; the connection loop is written once, over `Read + Write`, and
//! runs unchanged on a `threadlet::net::TcpStream` and a `std::net::TcpStream`.
//!
//! Also the load generator the bench CLI and the example use: N keep-alive clients, each
//! sending GETs back to back for a while and timing every response, either on an OS thread
//! each ([`load`]) or all on one thread that multiplexes them ([`load_multiplexed`], the shape
//! of the NSPR experiment's `zeusbench`, which used `select`).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The size of the generated body, as in the NSPR experiment (a 6 KB file).
pub const BODY_BYTES: usize = 6 * 1024;

/// The most header bytes a request may have before the server answers 431 and closes.
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Headers a request may have.
const MAX_HEADERS: usize = 32;

/// What the server serves.
#[derive(Clone, Debug)]
pub enum Content {
    /// The same generated body (`BODY_BYTES` long) for every path, its whole response
    /// prepared once.
    Generated(Arc<[u8]>),
    /// Files under a directory; `/` is `index.html`.
    Directory(PathBuf),
}

impl Content {
    /// The generated 6 KB body.
    pub fn generated() -> Content {
        Content::Generated(generated_response())
    }
}

/// The whole response (head and 6 KB body) that [`Content::Generated`] serves.
pub fn generated_response() -> Arc<[u8]> {
    let body: Vec<u8> = (0..BODY_BYTES).map(|i| b'a' + (i % 26) as u8).collect();
    ok(&body).into()
}

/// A 200 response carrying `body`.
fn ok(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nServer: threadlet-example\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// How a server reads a file: on threadlet, a `blocking` call; on a thread of its own, in
/// place.
pub type ReadFile = fn(PathBuf) -> io::Result<Vec<u8>>;

/// Serves one connection until the client closes it, asks to close, or errs. Returns the
/// requests answered.
pub fn serve_connection<S>(mut conn: S, content: &Content, read_file: ReadFile) -> u64
where
    S: Read + Write,
{
    let mut buf = vec![0u8; 4096];
    let mut filled = 0;
    let mut answered = 0;
    loop {
        // Parse what is buffered; read more while the head is incomplete.
        let (head_len, path, method_ok, keep_alive) = loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[..filled]) {
                Ok(httparse::Status::Complete(n)) => {
                    let version = req.version.unwrap_or(1);
                    let connection = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("connection"))
                        .map(|h| h.value.to_ascii_lowercase());
                    let keep_alive = match connection.as_deref() {
                        Some(b"close") => false,
                        Some(b"keep-alive") => true,
                        _ => version == 1,
                    };
                    let method = req.method.unwrap_or("");
                    let method_ok = method == "GET" || method == "HEAD";
                    break (n, req.path.unwrap_or("/").to_owned(), method_ok, keep_alive);
                }
                Ok(httparse::Status::Partial) => {
                    if filled == MAX_HEADER_BYTES {
                        let _ = conn.write_all(&simple(431, "Request Header Fields Too Large"));
                        return answered;
                    }
                    if filled == buf.len() {
                        buf.resize((buf.len() * 2).min(MAX_HEADER_BYTES), 0);
                    }
                    match conn.read(&mut buf[filled..]) {
                        Ok(0) | Err(_) => return answered,
                        Ok(n) => filled += n,
                    }
                }
                Err(_) => {
                    let _ = conn.write_all(&simple(400, "Bad Request"));
                    return answered;
                }
            }
        };
        let response = if !method_ok {
            simple(405, "Method Not Allowed").into()
        } else {
            respond(&path, content, read_file)
        };
        let sent = match response {
            Response::Prepared(r) => conn.write_all(&r),
            Response::Owned(r) => conn.write_all(&r),
        };
        if sent.is_err() {
            return answered;
        }
        answered += 1;
        // Keep what follows the head (a pipelined request; GET has no body).
        buf.copy_within(head_len..filled, 0);
        filled -= head_len;
        if !keep_alive {
            return answered;
        }
    }
}

enum Response {
    Prepared(Arc<[u8]>),
    Owned(Vec<u8>),
}

impl From<Vec<u8>> for Response {
    fn from(v: Vec<u8>) -> Response {
        Response::Owned(v)
    }
}

fn simple(status: u16, reason: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .into_bytes()
}

fn respond(path: &str, content: &Content, read_file: ReadFile) -> Response {
    match content {
        Content::Generated(r) => Response::Prepared(r.clone()),
        Content::Directory(root) => {
            let Some(file) = file_under(root, path) else {
                return simple(404, "Not Found").into();
            };
            match read_file(file) {
                Ok(body) => ok(&body).into(),
                Err(_) => simple(404, "Not Found").into(),
            }
        }
    }
}

/// The file a request path names under `root`, refusing any path that climbs out of it.
fn file_under(root: &Path, path: &str) -> Option<PathBuf> {
    let path = path.split(['?', '#']).next().unwrap_or("/");
    let rel = Path::new(path.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let mut p = root.join(rel);
    if path.ends_with('/') || rel.as_os_str().is_empty() {
        p.push("index.html");
    }
    Some(p)
}

/// Serves `listener` on the current threadlet runtime, one actor per connection, until
/// accepting fails. Call it inside an actor.
pub fn threadlet_server(listener: threadlet::net::TcpListener, content: Content) {
    while let Ok((conn, _)) = listener.accept() {
        let _ = conn.set_nodelay(true);
        let content = content.clone();
        threadlet::spawn(move || {
            serve_connection(conn, &content, |p| {
                threadlet::blocking(move || std::fs::read(p))
            })
        });
    }
}

/// Serves `listener` with one OS thread per connection until accepting fails.
pub fn threads_server(listener: std::net::TcpListener, content: Content) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { return };
        let _ = conn.set_nodelay(true);
        let content = content.clone();
        std::thread::spawn(move || serve_connection(conn, &content, std::fs::read::<PathBuf>));
    }
}

/// What a load run measured.
#[derive(Clone, Debug, Default)]
pub struct Load {
    /// Responses received.
    pub requests: u64,
    /// The run's length.
    pub elapsed: Duration,
    /// Every response's latency, sorted.
    pub latencies: Vec<Duration>,
    /// Connections that failed (refused, reset, a malformed response).
    pub errors: u64,
}

impl Load {
    /// Responses per second.
    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency below which `q` (0..=1) of the responses came.
    pub fn percentile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[i]
    }
}

/// `clients` keep-alive connections to `addr`, each on an OS thread of its own, sending GET
/// `path` back to back for `duration`; every response is read in full (its Content-Length)
/// and timed. `expect_body` bytes are checked where given.
pub fn load(
    addr: SocketAddr,
    clients: usize,
    duration: Duration,
    path: &str,
    expect_body: Option<usize>,
) -> Load {
    run_load(addr, duration, path, |request, until| {
        (0..clients)
            .map(|_| {
                let request = request.clone();
                load_thread(128 * 1024, move || {
                    client(addr, &request, until, expect_body)
                })
            })
            .collect()
    })
}

/// [`load`]'s measurement with every client on one OS thread, which multiplexes the
/// non-blocking connections with `epoll` (through `mio`): each connection has at most one
/// request outstanding, and gets its next as soon as its response is read in full.
pub fn load_multiplexed(
    addr: SocketAddr,
    clients: usize,
    duration: Duration,
    path: &str,
    expect_body: Option<usize>,
) -> Load {
    run_load(addr, duration, path, |request, until| {
        let clients = move || multiplexed_clients(addr, clients, &request, until, expect_body);
        vec![load_thread(256 * 1024, clients)]
    })
}

/// What one load-generator thread measured: every response's latency, and the errors.
type ThreadLoad = (Vec<Duration>, u64);

/// A load-generator thread with a stack of `stack` bytes.
fn load_thread(
    stack: usize,
    f: impl FnOnce() -> ThreadLoad + Send + 'static,
) -> std::thread::JoinHandle<ThreadLoad> {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .expect("a load-generator thread")
}

/// Starts the load-generator threads (`start`, given the request and when to stop) for
/// `duration`, and sums what they measured.
fn run_load(
    addr: SocketAddr,
    duration: Duration,
    path: &str,
    start: impl FnOnce(Arc<[u8]>, Instant) -> Vec<std::thread::JoinHandle<ThreadLoad>>,
) -> Load {
    let request: Arc<[u8]> = get_request(addr, path).into();
    let began = Instant::now();
    let threads = start(request, began + duration);
    let mut total = Load::default();
    for t in threads {
        let (lat, errors) = t.join().expect("a load-generator thread does not panic");
        total.requests += lat.len() as u64;
        total.latencies.extend(lat);
        total.errors += errors;
    }
    total.elapsed = began.elapsed();
    total.latencies.sort_unstable();
    total
}

/// [`load_multiplexed`]'s thread: opens `clients` connections, then serves their readiness
/// until `until`. A connection that fails counts an error and is opened again.
fn multiplexed_clients(
    addr: SocketAddr,
    clients: usize,
    request: &[u8],
    until: Instant,
    expect_body: Option<usize>,
) -> ThreadLoad {
    lower_priority();
    let mut poll = mio::Poll::new().expect("an epoll instance for the load generator");
    let mut events = mio::Events::with_capacity(clients.clamp(16, 1024));
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut conns: Vec<Option<Client>> = (0..clients).map(|_| None).collect();
    while Instant::now() < until {
        for (i, slot) in conns.iter_mut().enumerate() {
            if slot.is_none() {
                match Client::open(addr, &poll, i) {
                    Ok(c) => *slot = Some(c),
                    Err(_) => errors += 1,
                }
            }
        }
        let left = until.saturating_duration_since(Instant::now());
        match poll.poll(&mut events, Some(left)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("the load generator's epoll_wait failed: {e}"),
        }
        for ev in events.iter() {
            let i = ev.token().0;
            let Some(c) = conns[i].as_mut() else { continue };
            if c.advance(request, expect_body, until, &mut latencies)
                .is_err()
            {
                errors += 1;
                if let Some(mut c) = conns[i].take() {
                    let _ = poll.registry().deregister(&mut c.stream);
                }
            }
        }
        if conns.iter().any(Option::is_none) {
            std::thread::sleep(Duration::from_millis(1)); // as `client` after a failed connect
        }
    }
    (latencies, errors)
}

/// One connection of [`load_multiplexed`]: its request in flight and the response read so far.
struct Client {
    stream: mio::net::TcpStream,
    /// Bytes of the current request written.
    sent: usize,
    buf: Vec<u8>,
    /// Bytes in `buf` while the head is incomplete.
    filled: usize,
    /// Once the head is in: the body's length, and how much of it has come.
    body: Option<(usize, usize)>,
    /// When the current request was started.
    started: Instant,
}

impl Client {
    /// Connects (blocking), then registers the connection for both directions, edge-triggered.
    fn open(addr: SocketAddr, poll: &mio::Poll, token: usize) -> io::Result<Client> {
        let conn = std::net::TcpStream::connect(addr)?;
        conn.set_nodelay(true)?;
        conn.set_nonblocking(true)?;
        let mut stream = mio::net::TcpStream::from_std(conn);
        poll.registry().register(
            &mut stream,
            mio::Token(token),
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )?;
        Ok(Client {
            stream,
            sent: 0,
            buf: vec![0u8; 16 * 1024],
            filled: 0,
            body: None,
            started: Instant::now(),
        })
    }

    /// Moves the connection on as far as it goes without blocking (the registration is
    /// edge-triggered, so until an operation would block): writes the request, reads the
    /// response, records its latency and, before `until`, starts the next request.
    fn advance(
        &mut self,
        request: &[u8],
        expect_body: Option<usize>,
        until: Instant,
        latencies: &mut Vec<Duration>,
    ) -> io::Result<()> {
        loop {
            if self.sent < request.len() {
                match self.stream.write(&request[self.sent..]) {
                    Ok(n) => self.sent += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) => return Err(e),
                }
                continue;
            }
            let into = match self.body {
                None => self.filled,
                Some(_) => 0,
            };
            let n = match self.stream.read(&mut self.buf[into..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            };
            let (len, have) = match self.body {
                Some((len, have)) => (len, have + n),
                None => {
                    self.filled += n;
                    let Some((head, len)) = parse_head(&self.buf[..self.filled])? else {
                        if self.filled == self.buf.len() {
                            return Err(io::Error::other("a response head too long"));
                        }
                        continue;
                    };
                    (len, self.filled - head)
                }
            };
            if have > len {
                return Err(io::Error::other("more bytes than Content-Length"));
            }
            if have < len {
                self.body = Some((len, have));
                continue;
            }
            if expect_body.is_some_and(|b| b != len) {
                return Err(io::Error::other("a body of the wrong length"));
            }
            latencies.push(self.started.elapsed());
            (self.sent, self.filled, self.body) = (0, 0, None);
            self.started = Instant::now();
            if self.started >= until {
                self.sent = request.len(); // no more requests: idle until the end
                return Ok(());
            }
        }
    }
}

/// A response's head in `buf`, if complete: its length and the body's (Content-Length). An
/// error for anything but a 200 with a Content-Length.
fn parse_head(buf: &[u8]) -> io::Result<Option<(usize, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(head)) => {
            if resp.code != Some(200) {
                return Err(io::Error::other("status not 200"));
            }
            let len: usize = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
                .ok_or_else(|| io::Error::other("no Content-Length"))?;
            Ok(Some((head, len)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => Err(io::Error::other("a malformed response")),
    }
}

/// Lowers the calling thread's priority to the least (nice 19), so that on a machine shared
/// with the server the load generator takes only CPU time the server leaves: as if the
/// clients ran on another machine. Best effort: a refusal leaves the priority as it was.
fn lower_priority() {
    // SAFETY: `gettid` has no preconditions; `setpriority` on this thread's own id only
    // changes its scheduling priority.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
    }
}

/// One client: reconnects after an error, counting it.
fn client(
    addr: SocketAddr,
    request: &[u8],
    until: Instant,
    expect_body: Option<usize>,
) -> ThreadLoad {
    lower_priority();
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut buf = vec![0u8; 16 * 1024];
    while Instant::now() < until {
        let Ok(mut conn) = std::net::TcpStream::connect(addr) else {
            errors += 1;
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let _ = conn.set_nodelay(true);
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        while Instant::now() < until {
            let t = Instant::now();
            if conn.write_all(request).is_err() {
                errors += 1;
                break;
            }
            match read_response(&mut conn, &mut buf) {
                Ok(body) if expect_body.is_none_or(|b| b == body) => {
                    latencies.push(t.elapsed());
                }
                _ => {
                    errors += 1;
                    break;
                }
            }
        }
    }
    (latencies, errors)
}

/// A keep-alive `GET` of `path`.
fn get_request(addr: SocketAddr, path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes()
}

/// One `GET` of `path` on a connection of its own, `timeout` bounding the connect and each
/// read; returns the body's length, or an error for anything but a whole 200 response.
///
/// ```no_run
/// let addr = "127.0.0.1:8080".parse().unwrap();
/// let body = threadlet_examples::http::get_once(addr, "/", std::time::Duration::from_secs(1));
/// ```
pub fn get_once(addr: SocketAddr, path: &str, timeout: Duration) -> io::Result<usize> {
    let mut conn = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    let _ = conn.set_nodelay(true);
    conn.set_read_timeout(Some(timeout))?;
    conn.write_all(&get_request(addr, path))?;
    read_response(&mut conn, &mut vec![0u8; 16 * 1024])
}

/// Reads one response (head, then Content-Length bytes of body); returns the body's length.
fn read_response(conn: &mut std::net::TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    loop {
        let n = conn.read(&mut buf[filled..])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        filled += n;
        match parse_head(&buf[..filled])? {
            Some((head, len)) => {
                let mut have = filled - head;
                while have < len {
                    let n = conn.read(&mut buf[..])?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    have += n;
                }
                if have != len {
                    return Err(io::Error::other("more bytes than Content-Length"));
                }
                return Ok(len);
            }
            None if filled < buf.len() => {}
            None => return Err(io::Error::other("a response head too long")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_never_climb_out_of_the_root() {
        let root = Path::new("/srv");
        assert_eq!(
            file_under(root, "/"),
            Some(PathBuf::from("/srv/index.html"))
        );
        assert_eq!(
            file_under(root, "/a/b.txt?x=1"),
            Some(PathBuf::from("/srv/a/b.txt"))
        );
        assert_eq!(file_under(root, "/../etc/passwd"), None);
        assert_eq!(file_under(root, "/a/../../etc"), None);
    }

    /// The multiplexed load generator reads every response in full and checks it: against the
    /// thread-per-connection server, several connections get answers and none fails; against a
    /// server that answers with the wrong body length, every answer counts as an error.
    ///
    /// The generator runs at the least priority (nice 19), so on a busy machine one short run
    /// may get no CPU at all: runs are repeated, their figures summed, until there are enough
    /// (or a limit that only a hang reaches).
    #[test]
    fn the_multiplexed_load_generator_checks_every_response() {
        /// Sums 100 ms runs of 3 clients against a fresh server until `enough` says so.
        fn load_until(expect_body: Option<usize>, enough: impl Fn(&Load) -> bool) -> Load {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            std::thread::spawn(move || threads_server(listener, Content::generated()));
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut sum = Load::default();
            while !enough(&sum) {
                assert!(
                    Instant::now() < deadline,
                    "{} requests, {} errors",
                    sum.requests,
                    sum.errors
                );
                let run = load_multiplexed(addr, 3, Duration::from_millis(100), "/", expect_body);
                assert_eq!(run.latencies.len() as u64, run.requests);
                sum.requests += run.requests;
                sum.errors += run.errors;
            }
            sum
        }
        let good = load_until(Some(BODY_BYTES), |l| l.requests >= 3);
        assert_eq!(good.errors, 0);
        let bad = load_until(Some(1), |l| l.errors >= 2);
        assert_eq!(bad.requests, 0);
    }
}
