// Command structure measures the structure of polite's core module, so that
// a refactor can show its progress in numbers (issue 36). From the
// repository's root:
//
//	(cd .ci/tools && GOWORK=off go run ./structure)
//
// Usage:
//
//	structure [-C DIR] [-json]
//
// DIR is the repository's root: by default the root of the git work tree
// the command runs in, so that it measures the clone (or git worktree) it
// is run from; -C measures another, such as a worktree checked out at an
// older commit. The core module is the one whose go.mod is there: all its packages (the root package, fleet/,
// politeretry/, internal/..., examples/..., and any new one), without the
// modules nested in it (bench/, cmd/polite/, politeotel/, politecost/,
// .ci/tools/), loaded with GOWORK=off as a user's build sees them. Test
// files are left out of every figure. It prints:
//
//   - per package, its non-test files and those over 500 lines;
//   - its exported package-level names (types, functions, constants,
//     variables) and, apart, the exported methods of its exported types;
//   - the ties between files: the distinct ordered pairs (A, B) of
//     different files where A uses a name B declares, a package-level type,
//     function, constant or variable, or a method (struct fields do not
//     count), across packages as within one (go/types' Info.Uses);
//   - the ties against the layering, each with the names it uses: the
//     fewest ties that, reversed, would leave the files in layers (a
//     minimum feedback arc set of the graph of ties, exact for a tangle of
//     up to 24 files, see layering.go): where a file that others build on
//     uses one built on it;
//   - the wait-queue types: named struct types whose values wait in a queue
//     to be woken in turn, told by a channel field named wake (at ec51a52
//     waiter, slotWaiter and costWaiter; a name-based rule would count a
//     queue type and its ticket type twice, and the Waiter of a wait path
//     that queues nothing);
//   - the uses of AdaptiveDefault outside the controllers' files, those
//     that declare AdaptiveDefault, the controller interface (an interface
//     type named controller or Controller) or a type that implements it;
//   - the types with the most methods (and the files they are in), the
//     structs with the most fields, and the mutex fields locked at the most
//     sites;
//   - issue 36's goals, each met or not.
//
// At ec51a52, the commit issue 36 read, it gives 184 ties and 35 against
// the layering (the issue says 187 and 36: no definition tried gave those
// exactly, and this one came closest; see docs/testing.md), 110 exported
// names in the root package and 48 methods, three wait queues, the 11 uses
// of AdaptiveDefault the issue lists, call's 51 methods in 11 files,
// keyExtra's 17 fields and keyState.mu's 32 lock sites in 7 files.
//
// -json prints the same as one JSON object, every tie included (the text
// lists only those against the layering). -check exits 1, naming them, if
// a goal is not met: CI runs it so, so that the structure the goals ask
// for is kept.
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"go/types"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

// The goals of issue 36, and the length over which a file is long.
const (
	maxLines       = 500
	maxRootFiles   = 15
	maxAgainst     = 12
	maxWaitQueues  = 1
	modeIdentifier = "AdaptiveDefault"
	shown          = 5 // the rows of each "most" list in the text output
)

// report is everything structure measures; -json prints it as it is.
type report struct {
	Module          string         `json:"module"`
	Packages        []pkgReport    `json:"packages"`
	Ties            tiesReport     `json:"ties"`
	WaitQueues      []string       `json:"waitQueues"` // "name (file:line)"
	AdaptiveDefault modeReport     `json:"adaptiveDefault"`
	Methods         []countInFiles `json:"methods"` // per receiver type, most first
	Fields          []countInFiles `json:"fields"`  // per struct type, most first
	Locks           []countInFiles `json:"locks"`   // per mutex field, most sites first
	Goals           []goal         `json:"goals"`
	// LongAnywhere are the non-test Go files over maxLines in the whole
	// repository, every module and tool included (git's files).
	LongAnywhere []fileLines `json:"longAnywhere"`
}

type pkgReport struct {
	Dir      string      `json:"dir"` // relative to the root, "." for the root package
	Files    int         `json:"files"`
	Long     []fileLines `json:"long"` // over maxLines, longest first
	Exported exported    `json:"exported"`
}

type fileLines struct {
	File  string `json:"file"`
	Lines int    `json:"lines"`
}

type exported struct {
	Names   int `json:"names"` // the four below
	Types   int `json:"types"`
	Funcs   int `json:"funcs"`
	Consts  int `json:"consts"`
	Vars    int `json:"vars"`
	Methods int `json:"methods"` // of exported named types, apart from Names
}

type tiesReport struct {
	Files   int   `json:"files"` // non-test files of the core module
	Total   int   `json:"total"`
	Against int   `json:"against"`
	Exact   bool  `json:"exact"` // whether Against is the minimum (see layering.go)
	List    []tie `json:"list"`
}

type tie struct {
	From    string   `json:"from"`
	To      string   `json:"to"`
	Names   []string `json:"names"` // what From uses of To's; methods as Type.method
	Against bool     `json:"against,omitempty"`
}

type modeReport struct {
	Excluded []string   `json:"excluded"` // "file: why"
	Sites    int        `json:"sites"`
	ByFile   []fileRefs `json:"byFile"`
}

type fileRefs struct {
	File  string `json:"file"`
	Lines []int  `json:"lines"`
}

// countInFiles is how many of something a type (or a field, Type.field)
// has, and in which files they are.
type countInFiles struct {
	Name  string   `json:"name"`
	Count int      `json:"count"`
	Files []string `json:"files"`
}

type goal struct {
	What string `json:"what"`
	Now  int    `json:"now"`
	Max  int    `json:"max"`
	Met  bool   `json:"met"`
}

func main() {
	dir := flag.String("C", "", "the repository's root, where the core module's go.mod is (default: the git work tree's root)")
	asJSON := flag.Bool("json", false, "print JSON, every tie included")
	check := flag.Bool("check", false, "exit 1 if a goal is not met")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	r, err := measure(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "structure: %v\n", err)
		os.Exit(1)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "structure: %v\n", err)
		os.Exit(1)
	}
	if *check {
		failed := false
		for _, g := range r.Goals {
			if !g.Met {
				fmt.Fprintf(os.Stderr, "structure: %s: %d, at most %d\n", g.What, g.Now, g.Max)
				failed = true
			}
		}
		if failed {
			os.Exit(1)
		}
	}
}

// core is the core module as loaded, with what the measures share.
type core struct {
	root  string // absolute
	fset  *token.FileSet
	pkgs  []*packages.Package
	paths map[string]bool // the core's import paths
}

// rel is file's path relative to the root, with slashes.
func (c *core) rel(file string) string {
	r, err := filepath.Rel(c.root, file)
	if err != nil {
		return file
	}
	return filepath.ToSlash(r)
}

// pos is where p is, as file:line relative to the root.
func (c *core) pos(p token.Pos) (string, int) {
	position := c.fset.Position(p)
	return c.rel(position.Filename), position.Line
}

func measure(dir string) (*report, error) {
	if dir == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			return nil, fmt.Errorf("not in a git work tree (%v): -C names the repository's root", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("no go.mod in %s: -C names the repository's root", root)
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
			packages.NeedTypes | packages.NeedTypesInfo | packages.NeedModule,
		Dir: root,
		Env: append(os.Environ(), "GOWORK=off"),
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	if packages.PrintErrors(pkgs) > 0 {
		return nil, errors.New("the core module does not type-check")
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no packages in %s", root)
	}
	c := &core{root: root, pkgs: pkgs, paths: map[string]bool{}}
	for _, p := range pkgs {
		c.fset = p.Fset
		c.paths[p.PkgPath] = true
	}
	slices.SortFunc(c.pkgs, func(a, b *packages.Package) int { return cmp.Compare(a.PkgPath, b.PkgPath) })

	r := &report{Module: pkgs[0].Module.Path}
	if r.Packages, err = c.packages(); err != nil {
		return nil, err
	}
	r.Ties = c.ties()
	r.WaitQueues = c.waitQueues()
	r.AdaptiveDefault = c.adaptiveDefault()
	r.Methods, r.Fields = c.methodsAndFields()
	r.Locks = c.locks()
	if r.LongAnywhere, err = longFiles(root); err != nil {
		return nil, err
	}
	r.Goals = r.goals()
	return r, nil
}

// packages counts each package's files, long files and exported names.
func (c *core) packages() ([]pkgReport, error) {
	var out []pkgReport
	for _, p := range c.pkgs {
		pr := pkgReport{Dir: strings.TrimPrefix(strings.TrimPrefix(p.PkgPath, p.Module.Path), "/"), Long: []fileLines{}}
		if pr.Dir == "" {
			pr.Dir = "."
		}
		for _, f := range p.GoFiles {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			pr.Files++
			if n := strings.Count(string(data), "\n"); n > maxLines {
				pr.Long = append(pr.Long, fileLines{c.rel(f), n})
			}
		}
		slices.SortFunc(pr.Long, func(a, b fileLines) int { return cmp.Compare(b.Lines, a.Lines) })
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			pr.Exported.Names++
			switch obj := obj.(type) {
			case *types.TypeName:
				pr.Exported.Types++
				if named, ok := obj.Type().(*types.Named); ok {
					for m := range named.Methods() {
						if m.Exported() {
							pr.Exported.Methods++
						}
					}
				}
			case *types.Func:
				pr.Exported.Funcs++
			case *types.Const:
				pr.Exported.Consts++
			case *types.Var:
				pr.Exported.Vars++
			}
		}
		out = append(out, pr)
	}
	return out, nil
}

// ties finds every tie between two files of the core and the fewest of
// them against the layering.
func (c *core) ties() tiesReport {
	var files []string
	names := map[[2]string]map[string]bool{} // (from, to) → the names used
	for _, p := range c.pkgs {
		for _, f := range p.GoFiles {
			files = append(files, c.rel(f))
		}
		for id, obj := range p.TypesInfo.Uses {
			name, ok := c.declared(obj)
			if !ok {
				continue
			}
			from, _ := c.pos(id.Pos())
			to, _ := c.pos(obj.Pos())
			if from == to {
				continue
			}
			k := [2]string{from, to}
			if names[k] == nil {
				names[k] = map[string]bool{}
			}
			names[k][name] = true
		}
	}
	count := map[[2]string]int{}
	for k, ns := range names {
		count[k] = len(ns)
	}
	up, exact := layering(files, count)
	tr := tiesReport{Files: len(files), Total: len(names), Against: len(up), Exact: exact}
	for k, ns := range names {
		tr.List = append(tr.List, tie{From: k[0], To: k[1], Names: slices.Sorted(maps.Keys(ns)), Against: up[k]})
	}
	slices.SortFunc(tr.List, func(a, b tie) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return tr
}

// declared says whether obj is a name that makes a tie, a package-level
// name or a method of the core, and how to show it (Type.method for a
// method).
func (c *core) declared(obj types.Object) (string, bool) {
	if obj == nil || obj.Pkg() == nil || !c.paths[obj.Pkg().Path()] {
		return "", false
	}
	if fn, ok := obj.(*types.Func); ok {
		if recv := fn.Signature().Recv(); recv != nil {
			return typeName(recv.Type()) + "." + fn.Name(), true
		}
	}
	if _, ok := obj.(*types.PkgName); ok {
		return "", false // declared in the file that imports it
	}
	return obj.Name(), obj.Parent() == obj.Pkg().Scope()
}

// typeName is the name of a receiver's type, without its pointer or type
// arguments.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return t.String()
}

// namedTypes calls f with every named type declared at the package level
// of the core.
func (c *core) namedTypes(f func(*types.TypeName, *types.Named)) {
	for _, p := range c.pkgs {
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			if tn, ok := scope.Lookup(name).(*types.TypeName); ok && !tn.IsAlias() {
				if named, ok := tn.Type().(*types.Named); ok {
					f(tn, named)
				}
			}
		}
	}
}

// longFiles returns the non-test Go files of the repository at root (the
// files git tracks, and those it neither tracks nor ignores) over
// maxLines, longest first.
func longFiles(root string) ([]fileLines, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.go").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the repository's files: %v", err)
	}
	long := []fileLines{}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // listed but deleted in the work tree
		}
		if n := strings.Count(string(data), "\n"); n > maxLines {
			long = append(long, fileLines{f, n})
		}
	}
	slices.SortFunc(long, func(a, b fileLines) int { return cmp.Compare(b.Lines, a.Lines) })
	return long, nil
}
