package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"text/template"
)

// haproxyConf is the configuration the bench gives HAProxy: a stick table
// counting each source address's requests over a sliding second, a 429 to
// a request that finds more than L in it, and a 200 answered by HAProxy
// itself (no backend). Logs go to stdout, which the bench points at a file.
var haproxyConf = template.Must(template.New("haproxy.cfg").Parse(`# written by polite's bench
global
    log stdout format raw local0
    pidfile {{.Dir}}/haproxy.pid

defaults
    mode http
    log global
    option dontlognull
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 30s

frontend bench
    bind {{.Addr}}
    log-format "%[date(0,ms)] %ST"
    stick-table type ip size 1k expire 10s store http_req_rate(1s)
    http-request track-sc0 src
    http-request deny deny_status 429 if { sc_http_req_rate(0) gt {{.Rate}} }
    http-request return status 200 content-type text/plain string "ok"
`))

// startHAProxy starts Debian's HAProxy with a per-source http_req_rate(1s)
// stick table that denies with 429 above L, as a child process in a
// temporary directory. Attempts are counted from its log.
func startHAProxy(cfg serverConfig) (*instance, error) {
	bin, err := lookBinary("haproxy")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-haproxy-")
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err == nil {
		err = writeTemplate(filepath.Join(dir, "haproxy.cfg"), haproxyConf, struct {
			Dir, Addr string
			Rate      int
		}{dir, addr, perSecond(cfg)})
	}
	var logFile *os.File
	if err == nil {
		logFile, err = os.Create(filepath.Join(dir, "access.log"))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "-db", "-f", filepath.Join(dir, "haproxy.cfg"))
	cmd.Stdout = logFile
	return startLogged("haproxy", dir, addr, cmd)
}
