// harness_test.go -- what the tests run against: a real redis-server and
// real dlockd processes on free loopback ports (DLOCKD_BIN, else
// ../../build/dlockd), certificates made here with crypto/x509, and a
// proxy in front of dlockd that can lose answers, drop heartbeats and
// log what passes.
package dlockd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	adminToken  = "c28a7d41e95f4b60a3e8d1f7b2c90e56"
	clientToken = "6f1c0e9a52d84b7e9c13a0f2d5b8e471"
)

var (
	tmpDir    string
	plainURL  string // dlockd over HTTP, --max-wait-ms 3000
	secureURL string // dlockd over HTTPS with mutual TLS and --auth-file
	clientTLS *tls.Config
	redisPort int
	procs     []*exec.Cmd
)

func TestMain(m *testing.M) {
	if os.Getenv("DLOCKD_GO_HELPER") != "" {
		os.Exit(helperProcess())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	var err error
	if tmpDir, err = os.MkdirTemp("", "dlockd-go-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmpDir)
	defer stopAll()
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "# set-up failed:", err)
		return 1
	}
	return m.Run()
}

func setUp() error {
	redisPort = freePort()
	if err := startRedis(redisPort); err != nil {
		return err
	}
	var err error
	if plainURL, err = startDlockd(redisPort, "--max-wait-ms", "3000"); err != nil {
		return err
	}
	if err := makePKI(); err != nil {
		return err
	}
	auth := filepath.Join(tmpDir, "tokens")
	if err := os.WriteFile(auth, []byte(clientToken+" client go- go-client\n"+
		adminToken+" admin * ops\n"), 0600); err != nil {
		return err
	}
	secureURL, err = startDlockd(redisPort, "--auth-file", auth,
		"--tls-cert", filepath.Join(tmpDir, "server.pem"),
		"--tls-key", filepath.Join(tmpDir, "server.key"),
		"--tls-client-ca", filepath.Join(tmpDir, "ca.pem"))
	if err != nil {
		return err
	}
	os.Setenv("DLOCKD_URL", plainURL) // for the examples
	os.Unsetenv("DLOCKD_TOKEN")
	return nil
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func spawn(log string, name string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(tmpDir, log))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	procs = append(procs, cmd)
	return cmd, nil
}

func stopAll() {
	for _, c := range procs {
		if c.ProcessState == nil {
			_ = c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}
	}
}

// startRedis starts a redis-server on port and waits for its PONG.
func startRedis(port int) error {
	dir := filepath.Join(tmpDir, fmt.Sprintf("redis-%d", port))
	_ = os.MkdirAll(dir, 0755)
	cmd, err := spawn(fmt.Sprintf("redis-%d.log", port), "redis-server", "--port",
		fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--appendonly", "no", "--daemonize", "no")
	if err != nil {
		return err
	}
	for i := 0; i < 500; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			fmt.Fprint(c, "PING\r\n")
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d did not start", port)
}

func dlockdBin() string {
	if b := os.Getenv("DLOCKD_BIN"); b != "" {
		if abs, err := filepath.Abs(b); err == nil {
			return abs
		}
		return b
	}
	return "../../build/dlockd"
}

// startDlockd starts dlockd on a free port against the redis of
// redisPort and waits for /healthz.
func startDlockd(redisPort int, flags ...string) (string, error) {
	port := freePort()
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--redis",
		fmt.Sprintf("redis://127.0.0.1:%d/0", redisPort), "--log-level", "warn"}, flags...)
	cmd, err := spawn(fmt.Sprintf("dlockd-%d.log", port), dlockdBin(), args...)
	if err != nil {
		return "", err
	}
	scheme, hc := "http", http.DefaultClient
	for _, f := range flags {
		if f == "--tls-cert" {
			scheme = "https"
			hc = &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
		}
	}
	base := fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	for i := 0; i < 1000; i++ {
		if r, err := hc.Get(base + "/healthz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return base, nil
			}
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", fmt.Errorf("dlockd did not start; see %s/dlockd-%d.log", tmpDir, port)
}

// makePKI writes ca.pem, server.pem/key (127.0.0.1) and client.pem/key
// (client authentication) to tmpDir, and sets clientTLS.
func makePKI() error {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "go test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name string, der []byte, key *ecdsa.PrivateKey) error {
		p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if err := os.WriteFile(filepath.Join(tmpDir, name+".pem"), p, 0600); err != nil {
			return err
		}
		if key == nil {
			return nil
		}
		kd, _ := x509.MarshalECPrivateKey(key)
		return os.WriteFile(filepath.Join(tmpDir, name+".key"),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0600)
	}
	if err := write("ca", caDER, nil); err != nil {
		return err
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) error {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial),
			Subject:   pkix.Name{CommonName: "go test " + name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		return write(name, der, key)
	}
	if err := leaf("server", 2, x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	if err := leaf("client", 3, x509.ExtKeyUsageClientAuth); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(tmpDir, "client.pem"),
		filepath.Join(tmpDir, "client.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	clientTLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
	return nil
}

// proxy stands between a client and dlockd and logs each request.
type proxy struct {
	*httptest.Server
	target     string
	dropAnswer atomic.Int32 // this many next PUT answers are lost (the PUT is made)
	delayPUT   atomic.Int64 // ns a PUT's answer is held back
	dropBeats  atomic.Bool  // heartbeats are not passed on (the connection is cut)
	failWatch  atomic.Bool  // watches (GET with index) are answered 503
	mu         sync.Mutex
	log        []string  // "METHOD path status" in order
	lastBeat   time.Time // when the last heartbeat answered 200 arrived here
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{target: target}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) record(s string) {
	p.mu.Lock()
	p.log = append(p.log, s)
	p.mu.Unlock()
}

func (p *proxy) entries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *proxy) count(prefix string) int {
	n := 0
	for _, e := range p.entries() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func cut(w http.ResponseWriter) {
	if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
		c.Close()
	}
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	beat := strings.HasSuffix(r.URL.Path, "/heartbeat")
	if beat && p.dropBeats.Load() {
		p.record(r.Method + " " + r.URL.Path + " cut")
		cut(w)
		return
	}
	if r.Method == "GET" && r.URL.Query().Has("index") && p.failWatch.Load() {
		p.record(r.Method + " " + r.URL.Path + " 503")
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		fmt.Fprint(w, `{"error":"backend_unavailable","message":"the test proxy says no"}`)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	req.Header = r.Header.Clone()
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		p.record(r.Method + " " + r.URL.Path + " error")
		cut(w)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	p.record(fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, res.StatusCode))
	if beat && res.StatusCode == 200 {
		p.mu.Lock()
		if arrived.After(p.lastBeat) {
			p.lastBeat = arrived
		}
		p.mu.Unlock()
	}
	if r.Method == "PUT" {
		if d := p.delayPUT.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		if p.dropAnswer.Load() > 0 && p.dropAnswer.Add(-1) >= 0 {
			cut(w)
			return
		}
	}
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(body)
}

// state reads a lock's state straight from dlockd.
func state(t *testing.T, k Kind, name string) *Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := newClient(plainURL).Status(ctx, k, name)
	if err != nil {
		t.Fatalf("status of %s: %v", name, err)
	}
	return st
}

// forceRelease frees a lock on the plain dlockd, whoever holds it.
func forceRelease(t *testing.T, path string) {
	t.Helper()
	req, _ := http.NewRequest("DELETE", plainURL+path+"?force=true", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("force release of %s: %d", path, res.StatusCode)
	}
}

func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
	return 0
}

// recorder appends every answer the library gets to $DLOCKD_CONTRACT_LOG
// (when set), one JSON line {method, path, status, content_type, body},
// for tests/contract/validate.mjs to check against openapi.yaml.
type recorder struct{ next http.RoundTripper }

var contractMu sync.Mutex

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.next.RoundTrip(req)
	file := os.Getenv("DLOCKD_CONTRACT_LOG")
	if err != nil || file == "" {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	line, _ := json.Marshal(map[string]any{"method": req.Method, "path": req.URL.Path,
		"status": res.StatusCode, "content_type": res.Header.Get("Content-Type"),
		"body": string(body)})
	contractMu.Lock()
	defer contractMu.Unlock()
	if f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0644); err == nil {
		_, _ = f.Write(append(line, '\n'))
		f.Close()
	}
	return res, nil
}
