// Package tcpproxy is a TCP proxy for fault tests: it forwards connections
// to a real server and can cut them all (and refuse new ones) on demand,
// which is what a network partition looks like to the client, or blackhole
// them: connections stay open and accepted, but nothing gets through in
// either direction, which is what a half-open connection looks like (the
// client waits for an answer until its own timeout), or partition them: a
// blackhole whose server sides stay open after the clients give up, which
// is what a real partition looks like to the server, or slow them down.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	cut       bool
	blackhole bool
	partition bool
	delay     time.Duration
	// dead are the connections blackholed: they never forward again.
	dead map[net.Conn]bool
	// stranded are the client connections partitioned: when the client
	// closes one, its server side stays open.
	stranded map[net.Conn]bool
	hanging  int // server sides open after their clients closed
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{}), dead: make(map[net.Conn]bool), stranded: make(map[net.Conn]bool)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Blackhole stops every open connection from forwarding, for good, without
// closing it, and accepts new connections that never forward, until
// Restore.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
	for c := range p.conns {
		p.dead[c] = true
	}
}

// Partition is a real network partition, as the server sees it: like
// Blackhole, nothing gets through on the open connections, for good, nor
// on new ones until Restore; and when a client gives up and closes a
// connection that was open when the partition began, the proxy does not
// close the server's side of it. The server never learns the client left:
// it keeps that session, its open transaction and its locks until it
// closes the connection itself (wait_timeout, idle_transaction_timeout,
// TCP keepalive) or the proxy closes. A blackhole, by contrast, closes the
// server side as soon as the client closes, which no partition does.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
	p.partition = true
	for c := range p.conns {
		p.dead[c] = true
		p.stranded[c] = true
	}
}

// Stranded reports how many server sides of partitioned connections are
// still open although their clients closed them.
func (p *Proxy) Stranded() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hanging
}

func (p *Proxy) hang(d int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hanging += d
}

// Delay holds every chunk of data, in either direction, for d before
// forwarding it, until Restore or Delay(0).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Restore lets new connections through again (blackholed ones stay dead)
// without delay.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.blackhole = false
	p.partition = false
	p.delay = 0
}

func (p *Proxy) currentDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// forwards reports whether c still forwards.
func (p *Proxy) forwards(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.dead[c]
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	if p.blackhole {
		p.dead[c] = true
	}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	if !p.stranded[c] {
		delete(p.dead, c)
	}
}

// strand reports whether client was partitioned, so that its server side
// must stay open after the client closed.
func (p *Proxy) strand(client net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stranded[client]
}

// forget drops what the proxy kept of client once its server side closed.
func (p *Proxy) forget(client net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.stranded, client)
	delete(p.dead, client)
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		_ = client.Close()
		return
	}
	defer p.untrack(client)
	if !p.forwards(client) {
		_, _ = io.Copy(io.Discard, client) // accepted, never answered
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	defer p.forget(client)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if d := p.currentDelay(); n > 0 && d > 0 {
				time.Sleep(d)
			}
			if n > 0 && p.forwards(client) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if src == client && p.strand(client) {
			// A partition swallowed the client's close: the server side
			// stays open (the other pipe reads and drops what it sends)
			// until the server, or the proxy's Close, closes it.
			_ = client.Close()
			p.hang(1)
			done <- struct{}{}
			return
		}
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
	if p.strand(client) {
		p.hang(-1)
	}
}
