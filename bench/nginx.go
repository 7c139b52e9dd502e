package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"text/template"
)

// nginxConf is the configuration the bench gives nginx. limit_req runs in
// the preaccess phase, so it must guard a static file: a `return 200` would
// answer in the rewrite phase, before limit_req is consulted.
var nginxConf = template.Must(template.New("nginx.conf").Parse(`# written by polite's bench
worker_processes 1;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;

events {
    worker_connections 4096;
}

http {
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    fastcgi_temp_path {{.Dir}}/fastcgi;
    uwsgi_temp_path {{.Dir}}/uwsgi;
    scgi_temp_path {{.Dir}}/scgi;

    log_format bench '$msec $status';
    access_log {{.Dir}}/access.log bench;
    keepalive_requests 1000000;

    limit_req_zone $binary_remote_addr zone=bench:1m rate={{.Rate}}r/s;
    limit_req_status 429;
    limit_req_log_level info;

    server {
        listen {{.Addr}};
        root {{.Dir}}/html;
        default_type text/plain;
        location / {
            limit_req zone=bench burst={{.Burst}}{{if .NoDelay}} nodelay{{end}};
            try_files /index.txt =404;
        }
    }
}
`))

// startNginx starts Debian's nginx with limit_req at L requests per second,
// burst 10 nodelay, refusing with 429, as a child process in a temporary
// directory. Attempts are counted from its access log.
func startNginx(cfg serverConfig) (*instance, error) { return startNginxLimitReq(cfg, true) }

// startNginxQueue starts nginx as startNginx does, but with limit_req
// without nodelay, the form nginx's documentation leads with: up to 10
// requests over the rate are held and released at the rate, the next one
// is refused.
func startNginxQueue(cfg serverConfig) (*instance, error) { return startNginxLimitReq(cfg, false) }

// startNginxLimitReq starts nginx with limit_req at L requests per second
// and burst 10, with or without nodelay.
func startNginxLimitReq(cfg serverConfig, nodelay bool) (*instance, error) {
	bin, err := lookBinary("nginx")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-nginx-")
	if err != nil {
		return nil, err
	}
	// nginx's workers may run as nobody: let them read the static file.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	addr, err := freeAddr()
	if err == nil {
		err = writeNginxFiles(dir, addr, perSecond(cfg), nodelay)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	cmd := exec.Command(bin, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"),
		"-c", conf, "-g", "daemon off;")
	return startLogged("nginx", dir, addr, cmd)
}

// writeNginxFiles writes nginx.conf and the static file into dir.
func writeNginxFiles(dir, addr string, rate int, nodelay bool) error {
	html := filepath.Join(dir, "html")
	if err := os.Mkdir(html, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(html, "index.txt"), []byte("ok\n"), 0o644); err != nil {
		return err
	}
	return writeTemplate(filepath.Join(dir, "nginx.conf"), nginxConf, struct {
		Dir, Addr   string
		Rate, Burst int
		NoDelay     bool
	}{dir, addr, rate, burst, nodelay})
}
