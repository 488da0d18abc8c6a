//! TCP and UDP sockets shaped like `std::net`, whose blocking calls suspend the calling actor
//! instead of its worker.
//!
//! Inside an actor, an operation that would block parks the actor until the runtime's poller
//! reports the socket ready (`io.rs`); its worker runs other actors meanwhile. On a plain
//! thread the same call blocks that thread, as `std::net` does. A handler actor may use sockets
//! inside `handle`: it then keeps its stack and worker until `handle` returns, like any
//! suspension there.
//!
//! Errors are the operating system's (`io::Error` with its kind), plus `TimedOut` when a
//! timeout set with `set_read_timeout` / `set_write_timeout` (or given to `connect_timeout`,
//! `accept_timeout`) passes. A socket closes when dropped, including when the actor that owns
//! it is killed and unwound.
//!
//! Name resolution (`ToSocketAddrs` with a host name) runs `getaddrinfo` on the calling thread,
//! as std does; inside an actor, resolve with [`blocking`](fn@crate::blocking) first when the
//! resolver may be slow.

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::io::{Direction, PollSource};
use crate::safepoint::checkpoint;

/// The error of a zero timeout, which std refuses everywhere (`set_read_timeout`,
/// `connect_timeout`) rather than read as "do not wait".
fn zero_timeout() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "cannot set a 0 duration timeout",
    )
}

/// A read and a write timeout, in nanoseconds; 0 for none (a zero timeout is refused, as std
/// refuses it).
#[derive(Default)]
struct Timeouts([AtomicU64; 2]);

impl Timeouts {
    fn set(&self, dir: Direction, t: Option<Duration>) -> io::Result<()> {
        let nanos = match t {
            None => 0,
            Some(d) if d.is_zero() => return Err(zero_timeout()),
            Some(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        };
        // Relaxed: a setting, read by later operations of whoever uses the socket; it
        // publishes nothing else.
        self.0[dir as usize].store(nanos, Ordering::Relaxed);
        Ok(())
    }

    fn get(&self, dir: Direction) -> Option<Duration> {
        match self.0[dir as usize].load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// The deadline of an operation starting now.
    fn deadline(&self, dir: Direction) -> Option<Instant> {
        self.get(dir).and_then(|d| Instant::now().checked_add(d))
    }
}

/// A socket with its timeouts: what `TcpStream` and `UdpSocket` share.
struct Timed<S: AsRawFd> {
    source: PollSource<S>,
    timeouts: Timeouts,
}

impl<S: AsRawFd> Timed<S> {
    fn new(io: S) -> Timed<S> {
        Timed {
            source: PollSource::new(io),
            timeouts: Timeouts::default(),
        }
    }

    fn get_ref(&self) -> &S {
        self.source.get_ref()
    }

    /// An operation that waits for readability, within the read timeout.
    fn read_op<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.read_op_drains(op, |_| false)
    }

    /// `read_op` for an operation that can tell when it drained the socket (`io_drains`).
    fn read_op_drains<R>(
        &self,
        op: impl FnMut(&S) -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        checkpoint();
        let deadline = self.timeouts.deadline(Direction::Read);
        self.source
            .io_drains(Direction::Read, deadline, op, drained)
    }

    /// An operation that waits for room, within the write timeout.
    fn write_op<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        checkpoint();
        let deadline = self.timeouts.deadline(Direction::Write);
        self.source.io(Direction::Write, deadline, op)
    }
}

/// Tries each address in turn, as std does, returning the first success or the last error.
fn each_addr<T>(
    addrs: impl ToSocketAddrs,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for addr in addrs.to_socket_addrs()? {
        match f(addr) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        )
    }))
}

/// A TCP socket server, listening for connections; `std::net::TcpListener`'s shape.
///
/// ```
/// use std::io::{Read, Write};
/// use threadlet_runtime::net::{TcpListener, TcpStream};
///
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// let listener = TcpListener::bind("127.0.0.1:0").unwrap();
/// let addr = listener.local_addr().unwrap();
/// let server = rt.spawn(move || {
///     let (mut conn, _) = listener.accept().unwrap(); // suspends the actor, not the worker
///     let mut buf = [0; 5];
///     conn.read_exact(&mut buf).unwrap();
///     conn.write_all(&buf).unwrap();
/// });
/// let echoed = rt.block_on(move || {
///     let mut c = TcpStream::connect(addr).unwrap();
///     c.write_all(b"hello").unwrap();
///     let mut buf = [0; 5];
///     c.read_exact(&mut buf).unwrap();
///     buf
/// });
/// server.join().unwrap();
/// assert_eq!(&echoed, b"hello");
/// ```
pub struct TcpListener {
    source: PollSource<mio::net::TcpListener>,
}

impl TcpListener {
    /// Binds to the first address that accepts the bind (std's rules, `SO_REUSEADDR` set).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        each_addr(addr, std::net::TcpListener::bind).and_then(TcpListener::from_std)
    }

    /// Takes a std listener (put into non-blocking mode).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        Ok(TcpListener {
            source: PollSource::new(mio::net::TcpListener::from_std(listener)),
        })
    }

    /// Waits for the next connection.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        self.accept_until(None)
    }

    /// [`accept`](TcpListener::accept), giving up with `TimedOut` after `timeout`. A zero
    /// duration is refused (`InvalidInput`), as std's timeouts are.
    pub fn accept_timeout(&self, timeout: Duration) -> io::Result<(TcpStream, SocketAddr)> {
        if timeout.is_zero() {
            return Err(zero_timeout());
        }
        self.accept_until(Instant::now().checked_add(timeout))
    }

    fn accept_until(&self, deadline: Option<Instant>) -> io::Result<(TcpStream, SocketAddr)> {
        checkpoint();
        let (s, peer) = self.source.io(Direction::Read, deadline, |l| l.accept())?;
        Ok((TcpStream::from_mio(s), peer))
    }

    /// An endless iterator over connections, as std's `incoming`.
    pub fn incoming(&self) -> impl Iterator<Item = io::Result<TcpStream>> + '_ {
        std::iter::repeat_with(move || self.accept().map(|(s, _)| s))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.get_ref().local_addr()
    }

    /// The pending error of the socket, if any (clearing it).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.source.get_ref().take_error()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("addr", &self.local_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.source.get_ref().as_raw_fd()
    }
}

/// A TCP connection; `std::net::TcpStream`'s shape. `Read` and `Write` are implemented for
/// `&TcpStream` too, so that one actor may read while another writes (share it in an `Arc`).
pub struct TcpStream {
    inner: Timed<mio::net::TcpStream>,
}

impl TcpStream {
    fn from_mio(s: mio::net::TcpStream) -> TcpStream {
        TcpStream {
            inner: Timed::new(s),
        }
    }

    /// Connects to the first address that accepts, as std does.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        each_addr(addr, |a| TcpStream::connect_until(a, None))
    }

    /// Connects to `addr`, giving up with `TimedOut` after `timeout` (std's `connect_timeout`).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(zero_timeout());
        }
        TcpStream::connect_until(*addr, Instant::now().checked_add(timeout))
    }

    fn connect_until(addr: SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        checkpoint();
        let stream = TcpStream::from_mio(mio::net::TcpStream::connect(addr)?);
        // A non-blocking connect completes when the socket turns writable: then an error is
        // pending (refused, unreachable), or it has a peer.
        stream.inner.source.io(Direction::Write, deadline, |s| {
            if let Some(e) = s.take_error()? {
                return Err(e);
            }
            match s.peer_addr() {
                Ok(_) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    Err(io::ErrorKind::WouldBlock.into())
                }
                Err(e) => Err(e),
            }
        })?;
        Ok(stream)
    }

    /// Takes a std stream (put into non-blocking mode); its std timeouts are not carried over.
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream::from_mio(mio::net::TcpStream::from_std(stream)))
    }

    /// The address of the other end.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().peer_addr()
    }

    /// The address of this end.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }

    /// Shuts down the read half, the write half or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.get_ref().shutdown(how)
    }

    /// Sets `TCP_NODELAY` (off by default, as in std).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.inner.get_ref().set_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.get_ref().nodelay()
    }

    /// The longest a read waits (`None`: no limit, the default); past it the read fails
    /// with `TimedOut`. A zero duration is refused (`InvalidInput`), as in std.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.timeouts.set(Direction::Read, t)
    }

    /// The longest a write waits for room; see [`set_read_timeout`](Self::set_read_timeout).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.timeouts.set(Direction::Write, t)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeouts.get(Direction::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeouts.get(Direction::Write))
    }

    /// Reads without taking the data out of the socket's queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_op(|s| s.peek(buf))
    }

    /// The pending error of the socket, if any (clearing it).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.get_ref().take_error()
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        if len == 0 {
            return Ok(0); // as std's (the system call returns at once)
        }
        // A read shorter than the buffer took all there was: the next read waits for data.
        let drained = |&n: &usize| n > 0 && n < len;
        self.inner.read_op_drains(|mut s| s.read(buf), drained)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.inner.read_op(|mut s| s.read_vectored(bufs))
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write_op(|mut s| s.write(buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.inner.write_op(|mut s| s.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self).read_vectored(bufs)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("addr", &self.local_addr().ok())
            .field("peer", &self.peer_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.get_ref().as_raw_fd()
    }
}

/// A UDP socket; `std::net::UdpSocket`'s shape.
///
/// ```
/// use threadlet_runtime::net::UdpSocket;
///
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let a = UdpSocket::bind("127.0.0.1:0").unwrap();
/// let b = UdpSocket::bind("127.0.0.1:0").unwrap();
/// let b_addr = b.local_addr().unwrap();
/// let got = rt.spawn(move || {
///     let mut buf = [0; 16];
///     let (n, from) = b.recv_from(&mut buf).unwrap();
///     (buf[..n].to_vec(), from)
/// });
/// a.send_to(b"ping", b_addr).unwrap();
/// let (data, from) = got.join().unwrap();
/// assert_eq!((data.as_slice(), from), (&b"ping"[..], a.local_addr().unwrap()));
/// ```
pub struct UdpSocket {
    inner: Timed<mio::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds to the first address that accepts the bind.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        each_addr(addr, std::net::UdpSocket::bind).and_then(UdpSocket::from_std)
    }

    /// Takes a std socket (put into non-blocking mode).
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        Ok(UdpSocket {
            inner: Timed::new(mio::net::UdpSocket::from_std(socket)),
        })
    }

    /// Sends one datagram to `addr` (the first address it resolves to).
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let target = addr.to_socket_addrs()?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
        })?;
        self.inner.write_op(|s| s.send_to(buf, target))
    }

    /// Receives one datagram and its sender.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.inner.read_op(|s| s.recv_from(buf))
    }

    /// Receives one datagram without taking it out of the queue.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.inner.read_op(|s| s.peek_from(buf))
    }

    /// Sets the peer for `send` and `recv`, and filters what `recv` takes to it.
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        each_addr(addr, |a| self.inner.get_ref().connect(a))
    }

    /// Sends one datagram to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write_op(|s| s.send(buf))
    }

    /// Receives one datagram from the connected peer.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_op(|s| s.recv(buf))
    }

    /// The address of this end.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().peer_addr()
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.inner.get_ref().set_broadcast(on)
    }

    /// The longest a receive waits; see [`TcpStream::set_read_timeout`].
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.timeouts.set(Direction::Read, t)
    }

    /// The longest a send waits for room; see [`TcpStream::set_read_timeout`].
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.timeouts.set(Direction::Write, t)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeouts.get(Direction::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeouts.get(Direction::Write))
    }

    /// The pending error of the socket, if any (clearing it).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.get_ref().take_error()
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("addr", &self.local_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.get_ref().as_raw_fd()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn sockets_are_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<TcpListener>();
        is::<TcpStream>();
        is::<UdpSocket>();
    }
}
