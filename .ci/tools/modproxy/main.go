// Command modproxy adds one module of this repository at one version to a
// module proxy directory, the layout that GOPROXY=file://DIR reads:
//
//	DIR/github.com/politehttp/polite/politecost/@v/list
//	DIR/github.com/politehttp/polite/politecost/@v/v0.1.0.info
//	DIR/github.com/politehttp/polite/politecost/@v/v0.1.0.mod
//	DIR/github.com/politehttp/polite/politecost/@v/v0.1.0.zip
//
// It stands in for the proxy before a release's tags exist, so that CI can
// build each module on its own (GOWORK=off) against the versions its go.mod
// names, and `go install …/cmd/polite@VERSION` can be tried (see
// .ci/gowork-off and RELEASING.md).
//
// Usage:
//
//	modproxy -o DIR -module MODULE_DIR -version VERSION [-rev REVISION]
//
// MODULE_DIR is the module's directory, relative to the root of the git
// repository that holds it ("." for the library). Without -rev the zip
// holds the module's files as they are in the working tree: those git
// tracks and those it neither tracks nor ignores, so that build outputs
// stay out. With -rev (a tag that exists) it holds the files of that
// revision, as the proxy would serve them. Either way the zip follows the
// module zip format (golang.org/x/mod/zip): paths under module@version/,
// nested modules left out, sizes within the limits; and a sub-module
// without a LICENSE gets the root's, as the go command does.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

func main() {
	out := flag.String("o", "", "the proxy directory to add to (created if missing)")
	dir := flag.String("module", "", "the module's directory, relative to the repository's root")
	version := flag.String("version", "", "the version to serve the module at, such as v0.1.0")
	rev := flag.String("rev", "", "a git revision to take the files from (default: the working tree)")
	flag.Parse()
	if *out == "" || *dir == "" || *version == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, *dir, *version, *rev); err != nil {
		fmt.Fprintf(os.Stderr, "modproxy: %v\n", err)
		os.Exit(1)
	}
}

func run(out, dir, version, rev string) error {
	top, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	root := strings.TrimSpace(string(top))
	subdir := path.Clean(filepath.ToSlash(dir))
	if subdir == "." {
		subdir = ""
	}

	var files []modzip.File
	var goMod []byte
	var when time.Time
	if rev == "" {
		files, goMod, err = workingTreeFiles(root, subdir)
		if err == nil {
			when, err = commitTime(root, "HEAD")
		}
	} else {
		files, goMod, err = revisionFiles(root, rev, subdir)
		if err == nil {
			when, err = commitTime(root, rev)
		}
	}
	if err != nil {
		return err
	}
	if goMod == nil {
		return fmt.Errorf("%s has no go.mod", filepath.Join(root, dir))
	}
	modPath := modfile.ModulePath(goMod)
	if modPath == "" {
		return fmt.Errorf("%s: go.mod names no module", filepath.Join(root, dir))
	}
	m := module.Version{Path: modPath, Version: version}

	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(m.Version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(vdir, escVersion)

	var zbuf bytes.Buffer
	if err := modzip.Create(&zbuf, m, files); err != nil {
		return err
	}
	if err := os.WriteFile(base+".zip", zbuf.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", goMod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, when.UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", append(info, '\n'), 0o644); err != nil {
		return err
	}
	if err := addToList(filepath.Join(vdir, "list"), m.Version); err != nil {
		return err
	}

	// The zip's hash, as go.sum would record it: the same files give the
	// same hash whoever zips them, so for a revision that is a release tag
	// it is the hash the checksum database holds.
	h1, err := dirhash.HashZip(base+".zip", dirhash.Hash1)
	if err != nil {
		return err
	}
	from := "the working tree"
	if rev != "" {
		from = rev
	}
	zr, err := zip.NewReader(bytes.NewReader(zbuf.Bytes()), int64(zbuf.Len()))
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s (%d files, %d KiB zipped, from %s)\n",
		m.Path, m.Version, h1, len(zr.File), (zbuf.Len()+1023)/1024, from)
	return nil
}

// workingTreeFiles lists the files under root/subdir that git tracks or
// neither tracks nor ignores, as they are on disk, and reads its go.mod.
func workingTreeFiles(root, subdir string) ([]modzip.File, []byte, error) {
	dir := filepath.Join(root, filepath.FromSlash(subdir))
	list, err := git(dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, nil, err
	}
	var files []modzip.File
	var goMod []byte
	haveLicense := false
	for name := range strings.SplitSeq(strings.TrimSuffix(string(list), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked, but deleted in the working tree
		}
		if err != nil {
			return nil, nil, err
		}
		files = append(files, diskFile{path: p, name: name, info: info})
		switch name {
		case "go.mod":
			if goMod, err = os.ReadFile(p); err != nil {
				return nil, nil, err
			}
		case "LICENSE":
			haveLicense = true
		}
	}
	if !haveLicense && subdir != "" {
		if data, err := os.ReadFile(filepath.Join(root, "LICENSE")); err == nil {
			files = append(files, dataFile{name: "LICENSE", data: data})
		}
	}
	return files, goMod, nil
}

// revisionFiles lists the files under subdir at the git revision rev, as
// `git archive` gives them (the go command's way of reading a tag), and
// reads its go.mod.
func revisionFiles(root, rev, subdir string) ([]modzip.File, []byte, error) {
	args := []string{"-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", rev}
	if subdir != "" {
		args = append(args, subdir)
	}
	archive, err := git(root, args...)
	if err != nil {
		return nil, nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, nil, err
	}
	var files []modzip.File
	var goMod []byte
	haveLicense := false
	for _, zf := range zr.File {
		name := zf.Name
		if subdir != "" {
			var ok bool
			if name, ok = strings.CutPrefix(name, subdir+"/"); !ok {
				continue
			}
		}
		if name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		if zf.Mode()&fs.ModeSymlink != 0 {
			continue // the module zip format has no symbolic links
		}
		data, err := readZipFile(zf)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, dataFile{name: name, data: data})
		switch name {
		case "go.mod":
			goMod = data
		case "LICENSE":
			haveLicense = true
		}
	}
	if !haveLicense && subdir != "" {
		if data, err := git(root, "cat-file", "blob", rev+":LICENSE"); err == nil {
			files = append(files, dataFile{name: "LICENSE", data: data})
		}
	}
	return files, goMod, nil
}

// addToList adds version to the proxy's list of versions, once.
func addToList(file, version string) error {
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if slices.Contains(versions, version) {
		return nil
	}
	versions = append(versions, version)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

func commitTime(root, rev string) (time.Time, error) {
	out, err := git(root, "log", "-1", "--format=%cI", rev)
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
}

func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func readZipFile(zf *zip.File) ([]byte, error) {
	r, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// diskFile is a file of the working tree, for modzip.Create.
type diskFile struct {
	path, name string
	info       fs.FileInfo
}

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

// dataFile is a file held in memory, for modzip.Create.
type dataFile struct {
	name string
	data []byte
}

func (f dataFile) Path() string                 { return f.name }
func (f dataFile) Lstat() (fs.FileInfo, error)  { return dataFileInfo{f}, nil }
func (f dataFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type dataFileInfo struct{ f dataFile }

func (i dataFileInfo) Name() string       { return path.Base(i.f.name) }
func (i dataFileInfo) Size() int64        { return int64(len(i.f.data)) }
func (i dataFileInfo) Mode() fs.FileMode  { return 0o644 }
func (i dataFileInfo) ModTime() time.Time { return time.Time{} }
func (i dataFileInfo) IsDir() bool        { return false }
func (i dataFileInfo) Sys() any           { return nil }
