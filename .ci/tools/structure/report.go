package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The goals of issue 36, and the report as text.

// goals measures issue 36's goals for the structure.
func (r *report) goals() []goal {
	rootFiles := 0
	for _, p := range r.Packages {
		if p.Dir == "." {
			rootFiles = p.Files
		}
	}
	gs := []goal{
		{What: "non-test files of the root package", Now: rootFiles, Max: maxRootFiles},
		{What: fmt.Sprintf("non-test files over %d lines, any module", maxLines), Now: len(r.LongAnywhere), Max: 0},
		{What: "wait-queue types", Now: len(r.WaitQueues), Max: maxWaitQueues},
		{What: modeIdentifier + " outside the controllers", Now: r.AdaptiveDefault.Sites, Max: 0},
		{What: "ties against the layering", Now: r.Ties.Against, Max: maxAgainst},
	}
	for i := range gs {
		gs[i].Met = gs[i].Now <= gs[i].Max
	}
	return gs
}

// print writes the report for a reader: every figure, the ties against
// the layering with the names they use, and the first rows of each list.
func (r *report) print(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("The core module, %s (non-test files only)\n\n", r.Module)
	p("Packages: files, files over %d lines, exported names (types, funcs, consts, vars) + methods\n", maxLines)
	for _, pr := range r.Packages {
		e := pr.Exported
		p("  %-20s %3d files, %d long; %3d exported (%d types, %d funcs, %d consts, %d vars) + %d methods\n",
			pr.Dir, pr.Files, len(pr.Long), e.Names, e.Types, e.Funcs, e.Consts, e.Vars, e.Methods)
		for _, l := range pr.Long {
			p("      %s: %d lines\n", l.File, l.Lines)
		}
	}

	t := r.Ties
	how := "the fewest ties whose reversal would leave the files in layers"
	if !t.Exact {
		how = "found by a local search, perhaps not the fewest: see layering.go"
	}
	p("\nTies: %d between %d files (A uses a package-level name or a method that B declares)\n", t.Total, t.Files)
	p("Against the layering: %d (%s); A → B: the names A uses\n", t.Against, how)
	for _, tie := range t.List {
		if tie.Against {
			p("  %s → %s: %s\n", tie.From, tie.To, strings.Join(tie.Names, ", "))
		}
	}

	p("\nNon-test Go files over %d lines, in any module of the repository: %d\n", maxLines, len(r.LongAnywhere))
	for _, l := range r.LongAnywhere {
		p("  %s: %d lines\n", l.File, l.Lines)
	}

	p("\nWait-queue types: %d", len(r.WaitQueues))
	if len(r.WaitQueues) > 0 {
		p(": %s", strings.Join(r.WaitQueues, ", "))
	}
	p("\n")

	m := r.AdaptiveDefault
	p("\n%s outside the controllers: %d sites in %d files\n", modeIdentifier, m.Sites, len(m.ByFile))
	for _, f := range m.ByFile {
		p("  %s: lines %s\n", f.File, joinInts(f.Lines))
	}
	p("  not counted:\n")
	for _, e := range m.Excluded {
		p("    %s\n", e)
	}

	for _, list := range []struct {
		title, unit string
		rows        []countInFiles
	}{
		{"Most methods", "methods", r.Methods},
		{"Most fields", "fields", r.Fields},
		{"Mutex fields locked at the most sites", "sites", r.Locks},
	} {
		p("\n%s:\n", list.title)
		for _, row := range list.rows[:min(shown, len(list.rows))] {
			in := fmt.Sprintf("in %d files", len(row.Files))
			if len(row.Files) == 1 {
				in = "in " + row.Files[0]
			}
			p("  %-28s %3d %s %s\n", row.Name, row.Count, list.unit, in)
		}
	}

	p("\nIssue 36's goals:\n")
	for _, g := range r.Goals {
		met := "not yet"
		if g.Met {
			met = "met"
		}
		p("  %-40s %3d (at most %d): %s\n", g.What, g.Now, g.Max, met)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mostFirst sorts rows by count, most first, then by name.
func mostFirst(rows []countInFiles) []countInFiles {
	slices.SortFunc(rows, func(a, b countInFiles) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name))
	})
	return rows
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
