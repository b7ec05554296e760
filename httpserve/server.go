package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultAddr is the listen address when Config.Addr is empty.
const DefaultAddr = "127.0.0.1:8080"

// Config configures the HTTP server in front of the bridge's handler. The
// zero value of every field means its default.
type Config struct {
	// Addr is the listen address for Listen and ListenAndServe. Default
	// DefaultAddr.
	Addr string
	// TLSCert and TLSKey are PEM files; when both are set the server speaks
	// HTTPS with HTTP/2 (ALPN h2) and HTTP/1.1. Default: plain HTTP.
	// ReloadTLS reads them again.
	TLSCert, TLSKey string
	// ReadHeaderTimeout bounds reading a request's headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request. Default 30 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response. Default 30 s.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle that long. Default 120 s.
	IdleTimeout time.Duration
	// MaxHeaderBytes limits request headers. Default 64 KiB.
	MaxHeaderBytes int
	// NoH2C turns off HTTP/2 over clear text with prior knowledge. Default:
	// h2c on.
	NoH2C bool
	// NoCoalesce turns off the pipelining write coalescing
	// (NewCoalescingListener) on plain-HTTP connections. Default: on.
	NoCoalesce bool
	// Log receives server errors (TLS handshakes, accept errors). Default:
	// discard.
	Log *slog.Logger
}

// Server is an http.Server set up for ctibridge: timeouts, header limit,
// HTTP/1.1 with coalesced pipelined responses, h2c, HTTP/2 over TLS.
type Server struct {
	// Immutable after New.
	cfg Config
	srv *http.Server

	cert atomic.Pointer[tls.Certificate] // served to new TLS handshakes
}

// New returns a server for h (in serve, the mux of the REST API, the
// WebSocket hub and the panel). Nothing listens until Serve or
// ListenAndServe.
func New(cfg Config, h http.Handler) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("httpserve: the TLS certificate and key go together: give both or neither")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.ReadHeaderTimeout, 10*time.Second)
	def(&cfg.ReadTimeout, 30*time.Second)
	def(&cfg.WriteTimeout, 30*time.Second)
	def(&cfg.IdleTimeout, 120*time.Second)
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 64 << 10
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(!cfg.NoH2C)
	srv := &http.Server{
		Addr:              cfg.Addr,
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		Protocols:         &protos,
		ConnState:         ConnStateHook(nil),
		ErrorLog:          slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelDebug),
	}
	s := &Server{cfg: cfg, srv: srv}
	if cfg.TLSCert != "" {
		if err := s.ReloadTLS(); err != nil {
			return nil, err
		}
		srv.TLSConfig = &tls.Config{
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
			MinVersion:     tls.VersionTLS12,
		}
	}
	return s, nil
}

// ReloadTLS reads the certificate and key files again (a renewed
// certificate) and serves them to new connections from now on; open
// connections keep theirs. On error the certificate served so far stays.
// Without TLS it does nothing. Safe to call while serving.
func (s *Server) ReloadTLS() error {
	if s.cfg.TLSCert == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
	if err != nil {
		return fmt.Errorf("httpserve: %w", err)
	}
	s.cert.Store(&cert)
	return nil
}

// HTTPServer is the underlying server, for RegisterOnShutdown (the
// WebSocket hub closes its hijacked connections there).
func (s *Server) HTTPServer() *http.Server { return s.srv }

// Listen opens the configured address.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("httpserve: listen: %w", err)
	}
	return ln, nil
}

// Serve serves ln until Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	if s.srv.TLSConfig != nil {
		// The certificate comes from GetCertificate: ServeTLS adds ALPN h2.
		return s.srv.ServeTLS(ln, "", "")
	}
	if !s.cfg.NoCoalesce {
		ln = NewCoalescingListener(ln)
	}
	return s.srv.Serve(ln)
}

// ListenAndServe is Listen then Serve.
func (s *Server) ListenAndServe() error {
	ln, err := s.Listen()
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Shutdown stops accepting, waits for in-flight requests until ctx is
// done, then closes what is left. Hijacked connections are not covered:
// their owner closes them (RegisterOnShutdown).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.srv.Close()
	}
	return err
}
