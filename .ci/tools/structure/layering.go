package main

import (
	"math/bits"
	"slices"
)

// maxExact is the largest tangle (strongly connected set of files) whose
// layering is searched exhaustively: 2^24 subsets, 64 MiB and about a
// second. A larger one is ordered by a local search, whose count of ties
// against the layering may be above the fewest.
const maxExact = 24

// against is the price of a tie against the layering: the fewest ties
// first, then, among layerings with as few, the fewest names used by them,
// so that of two files that use each other the one that uses fewer names
// of the other is the one that reaches up.
func against(names int) uint32 { return 1<<16 + uint32(min(names, 1<<16-1)) }

// layering finds the ties against the layering of the graph of ties
// between files (each tie with the number of names it uses): the fewest
// ties that, reversed, would leave the files in layers, each using only
// files below it (a minimum feedback arc set). Files that use each other
// through a cycle, however long, form a tangle; every tie between two
// tangles (or lone files) goes one way and is never against the layering.
// Inside a tangle, the files are put in the order that leaves the fewest
// ties from a lower file to a higher one (a file others build on using one
// built on it), and of those the fewest names (see against); among orders
// as good, the one that puts the file first in name order highest is
// taken, so that the same code gives the same list. exact is false when a
// tangle was too large to search (see maxExact).
func layering(files []string, ties map[[2]string]int) (up map[[2]string]bool, exact bool) {
	files = slices.Sorted(slices.Values(files))
	index := make(map[string]int, len(files))
	for i, f := range files {
		index[f] = i
	}
	price := make([][]uint32, len(files)) // price[a][b]: a uses names of b; 0 if none
	for i := range price {
		price[i] = make([]uint32, len(files))
	}
	for t, names := range ties {
		price[index[t[0]]][index[t[1]]] = against(names)
	}

	up, exact = map[[2]string]bool{}, true
	for _, tangle := range tangles(price) {
		if len(tangle) < 2 {
			continue
		}
		var order []int // tangle's members, lowest layer first
		if len(tangle) <= maxExact {
			order = cheapest(tangle, price)
		} else {
			order = sifted(tangle, price)
			exact = false
		}
		for i, low := range order {
			for _, high := range order[i+1:] {
				if price[low][high] > 0 {
					up[[2]string{files[low], files[high]}] = true
				}
			}
		}
	}
	return up, exact
}

// tangles are the strongly connected components of the graph (Tarjan's
// algorithm), each sorted.
func tangles(price [][]uint32) [][]int {
	n := len(price)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for w := range n {
			if price[v][w] == 0 {
				continue
			}
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	return out
}

// cheapest orders a tangle, lowest first, at the least price of ties from
// a lower member to a higher one, by dynamic programming over its subsets:
// cost[S] is the least price among the members of S when they are the
// lowest |S| layers, and the top of S is the member v that gives the least
// cost[S\v] plus the price of the ties from S\v up to v. That price is
// read from two tables per member, one for each half of S's bits.
func cheapest(tangle []int, price [][]uint32) []int {
	m := len(tangle)
	half := (m + 1) / 2
	lowHalf, highHalf := make([][]uint32, m), make([][]uint32, m)
	for j, b := range tangle {
		lowHalf[j], highHalf[j] = make([]uint32, 1<<half), make([]uint32, 1<<(m-half))
		for s := 1; s < 1<<half; s++ {
			i := bits.TrailingZeros(uint(s))
			lowHalf[j][s] = lowHalf[j][s&(s-1)] + price[tangle[i]][b]
		}
		for s := 1; s < 1<<(m-half); s++ {
			i := bits.TrailingZeros(uint(s))
			highHalf[j][s] = highHalf[j][s&(s-1)] + price[tangle[half+i]][b]
		}
	}
	top := func(cost []uint32, s uint32) (v int, c uint32) {
		c = ^uint32(0)
		for rest := s; rest != 0; rest &= rest - 1 {
			j := bits.TrailingZeros32(rest)
			below := s &^ (1 << j)
			if k := cost[below] + lowHalf[j][below&(1<<half-1)] + highHalf[j][below>>half]; k < c {
				v, c = j, k
			}
		}
		return v, c
	}
	cost := make([]uint32, 1<<m)
	for s := uint32(1); s < 1<<m; s++ {
		_, cost[s] = top(cost, s)
	}
	order := make([]int, m)
	for s, i := uint32(1<<m-1), m-1; s != 0; i-- {
		v, _ := top(cost, s)
		order[i] = tangle[v]
		s &^= 1 << v
	}
	return order
}

// sifted orders a tangle too large for cheapest by a local search: from
// the order of the members that use the fewest others first, each member
// in turn moves to the place where its ties against the order cost least,
// until no move costs less.
func sifted(tangle []int, price [][]uint32) []int {
	usesIn := func(a int) int {
		n := 0
		for _, b := range tangle {
			if price[a][b] > 0 {
				n++
			}
		}
		return n
	}
	order := slices.Clone(tangle)
	slices.SortStableFunc(order, func(a, b int) int { return usesIn(a) - usesIn(b) })
	for moved := true; moved; {
		moved = false
		for _, v := range tangle {
			i := slices.Index(order, v)
			rest := slices.Delete(slices.Clone(order), i, i+1)
			// Placed at p, v is against the order for each member below it
			// that uses it and each one above it that it uses.
			var cost uint32
			for _, u := range rest {
				cost += price[v][u]
			}
			best, bestAt, now := cost, 0, cost
			for p, u := range rest {
				if p == i {
					now = cost
				}
				cost -= price[v][u] // u goes below v
				cost += price[u][v]
				if cost < best {
					best, bestAt = cost, p+1
				}
			}
			if i == len(rest) {
				now = cost
			}
			if best < now {
				order = slices.Insert(rest, bestAt, v)
				moved = true
			}
		}
	}
	return order
}
