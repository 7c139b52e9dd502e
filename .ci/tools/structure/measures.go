package main

import (
	"fmt"
	"go/ast"
	"go/types"
	"maps"
	"slices"
	"strings"
)

// The measures besides the ties: the wait queues, AdaptiveDefault's uses,
// the methods, fields and lock sites.

// waitQueues lists the named struct types whose values wait in a queue
// to be woken in turn: those with a channel field named wake.
func (c *core) waitQueues() []string {
	out := []string{}
	c.namedTypes(func(tn *types.TypeName, named *types.Named) {
		st, ok := named.Underlying().(*types.Struct)
		if !ok {
			return
		}
		for i := range st.NumFields() {
			f := st.Field(i)
			if _, isChan := f.Type().Underlying().(*types.Chan); isChan && f.Name() == "wake" {
				file, line := c.pos(tn.Pos())
				out = append(out, fmt.Sprintf("%s (%s:%d)", tn.Name(), file, line))
				return
			}
		}
	})
	return out
}

// adaptiveDefault finds the uses of the AdaptiveDefault mode outside the
// controllers' files.
func (c *core) adaptiveDefault() modeReport {
	why := map[string][]string{} // a file left out → what it declares
	exclude := func(file, reason string) {
		if !slices.Contains(why[file], reason) {
			why[file] = append(why[file], reason)
		}
	}
	modes := map[types.Object]bool{}
	var ifaces []*types.TypeName
	for _, p := range c.pkgs {
		if obj, ok := p.Types.Scope().Lookup(modeIdentifier).(*types.Const); ok {
			modes[obj] = true
			file, _ := c.pos(obj.Pos())
			exclude(file, modeIdentifier)
		}
	}
	c.namedTypes(func(tn *types.TypeName, named *types.Named) {
		if types.IsInterface(named) && strings.EqualFold(tn.Name(), "controller") {
			ifaces = append(ifaces, tn)
			file, _ := c.pos(tn.Pos())
			exclude(file, "the interface "+tn.Name())
		}
	})
	c.namedTypes(func(tn *types.TypeName, named *types.Named) {
		if types.IsInterface(named) {
			return
		}
		for _, iface := range ifaces {
			it := iface.Type().Underlying().(*types.Interface)
			if types.Implements(named, it) || types.Implements(types.NewPointer(named), it) {
				file, _ := c.pos(tn.Pos())
				exclude(file, tn.Name()+" (a "+iface.Name()+")")
			}
		}
	})

	mr := modeReport{Excluded: []string{}, ByFile: []fileRefs{}}
	lines := map[string][]int{}
	left := map[string]int{} // uses in the files left out
	for _, p := range c.pkgs {
		for id, obj := range p.TypesInfo.Uses {
			if !modes[obj] {
				continue
			}
			file, line := c.pos(id.Pos())
			if why[file] == nil {
				lines[file] = append(lines[file], line)
				mr.Sites++
			} else {
				left[file]++
			}
		}
	}
	// The uses in the files left out are said, so that a branch moved
	// into one of them is seen.
	for _, file := range slices.Sorted(maps.Keys(why)) {
		mr.Excluded = append(mr.Excluded, fmt.Sprintf("%s: declares %s; %d uses there", file, strings.Join(why[file], ", "), left[file]))
	}
	for _, file := range slices.Sorted(maps.Keys(lines)) {
		slices.Sort(lines[file])
		mr.ByFile = append(mr.ByFile, fileRefs{file, lines[file]})
	}
	return mr
}

// methodsAndFields counts the methods of each named type and the fields
// of each struct type, most first.
func (c *core) methodsAndFields() (methods, fields []countInFiles) {
	c.namedTypes(func(tn *types.TypeName, named *types.Named) {
		if named.NumMethods() > 0 {
			in := map[string]bool{}
			for m := range named.Methods() {
				file, _ := c.pos(m.Pos())
				in[file] = true
			}
			methods = append(methods, countInFiles{tn.Name(), named.NumMethods(), slices.Sorted(maps.Keys(in))})
		}
		if st, ok := named.Underlying().(*types.Struct); ok && st.NumFields() > 0 {
			file, _ := c.pos(tn.Pos())
			fields = append(fields, countInFiles{tn.Name(), st.NumFields(), []string{file}})
		}
	})
	return mostFirst(methods), mostFirst(fields)
}

// locks counts, for each mutex field of a struct of the core, the sites
// that lock it (Lock, RLock), whatever the variable that holds the struct
// is called.
func (c *core) locks() []countInFiles {
	owner := map[*types.Var]string{} // a field → Type.field
	c.namedTypes(func(tn *types.TypeName, named *types.Named) {
		if st, ok := named.Underlying().(*types.Struct); ok {
			for f := range st.Fields() {
				owner[f] = tn.Name() + "." + f.Name()
			}
		}
	})
	sites := map[string]map[string]int{} // Type.field → file → sites
	for _, p := range c.pkgs {
		for _, file := range p.Syntax {
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !isLock(p.TypesInfo.Uses[sel.Sel]) {
					return true
				}
				field := lockedField(p.TypesInfo, sel)
				if field == nil || owner[field.Origin()] == "" {
					return true
				}
				name := owner[field.Origin()]
				if sites[name] == nil {
					sites[name] = map[string]int{}
				}
				f, _ := c.pos(call.Pos())
				sites[name][f]++
				return true
			})
		}
	}
	var out []countInFiles
	for name, byFile := range sites {
		n := 0
		for _, k := range byFile {
			n += k
		}
		out = append(out, countInFiles{name, n, slices.Sorted(maps.Keys(byFile))})
	}
	return mostFirst(out)
}

// isLock says whether obj is the Lock or RLock method of sync.Mutex or
// sync.RWMutex. TryLock is left out, as issue 36 counted.
func isLock(obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "sync" || fn.Signature().Recv() == nil {
		return false
	}
	return fn.Name() == "Lock" || fn.Name() == "RLock"
}

// lockedField is the mutex field that x.Lock() locks: x itself when it
// selects a field (ks.mu.Lock()), or the embedded field the method is
// promoted through (ks.Lock() where ks embeds a sync.Mutex).
func lockedField(info *types.Info, sel *ast.SelectorExpr) *types.Var {
	if s, ok := sel.X.(*ast.SelectorExpr); ok {
		if v, ok := info.Uses[s.Sel].(*types.Var); ok && v.IsField() {
			return v
		}
	}
	selection := info.Selections[sel]
	if selection == nil || len(selection.Index()) < 2 {
		return nil
	}
	var field *types.Var
	t := selection.Recv()
	for _, i := range selection.Index()[:len(selection.Index())-1] {
		if p, ok := t.Underlying().(*types.Pointer); ok {
			t = p.Elem()
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok {
			return nil
		}
		field = st.Field(i)
		t = field.Type()
	}
	return field
}
