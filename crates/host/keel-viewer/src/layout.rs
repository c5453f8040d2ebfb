//! A layered (Sugiyama-style) layout of a small directed graph, top to bottom: every edge points
//! down where the graph allows it.
//!
//! Data flow: [`layered`] takes node sizes and edges by index and
//! 1. assigns layers by longest path from the sources (Kahn's order; a cycle is broken at the
//!    waiting node with the fewest unplaced predecessors, its edges drawn upwards),
//! 2. splits an edge spanning several layers into a chain through one dummy point per layer,
//! 3. orders each layer by barycentre sweeps (down, then up), keeping the order with the fewest
//!    crossings seen,
//! 4. places nodes horizontally at the mean of their neighbours, separated by a gap,
//! 5. returns each node's box and each edge's polyline, from its source to its target.
//!
//! Deterministic: the same input gives the same coordinates.

/// Horizontal gap between neighbours of a layer.
const NODE_GAP: f64 = 24.0;
/// Vertical gap between layers (edge labels sit in it).
const LAYER_GAP: f64 = 44.0;
/// Width of a dummy point's slot.
const DUMMY_WIDTH: f64 = 12.0;
/// Margin around the drawing.
pub const MARGIN: f64 = 12.0;
/// Barycentre sweeps (each one down and one up).
const SWEEPS: usize = 6;
/// Coordinate refinement rounds.
const ROUNDS: usize = 4;

/// A node's placed box (top-left corner and size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

impl Placed {
    /// Horizontal centre.
    pub fn cx(&self) -> f64 {
        self.x + self.w / 2.0
    }
}

/// The result of [`layered`].
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// One box per input node, in input order.
    pub nodes: Vec<Placed>,
    /// One polyline per input edge, in input order, from its source's border to its target's.
    pub edges: Vec<Vec<(f64, f64)>>,
    /// Layer of each input node (0 at the top).
    pub layers: Vec<usize>,
    /// Width of the drawing, margins included.
    pub width: f64,
    /// Height of the drawing, margins included.
    pub height: f64,
}

/// Layer of every node by longest path from the sources, cycles broken (see the module docs).
fn assign_layers(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut preds_left = vec![0usize; n];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a != b && a < n && b < n {
            preds_left[b] += 1;
            out[a].push(b);
        }
    }
    let mut layer = vec![0usize; n];
    let mut placed = vec![false; n];
    let mut ready: std::collections::VecDeque<usize> =
        (0..n).filter(|&v| preds_left[v] == 0).collect();
    let mut done = 0;
    while done < n {
        let v = match ready.pop_front() {
            Some(v) if !placed[v] => v,
            Some(_) => continue,
            // A cycle: take the unplaced node waiting for the fewest predecessors.
            None => match (0..n)
                .filter(|&v| !placed[v])
                .min_by_key(|&v| preds_left[v])
            {
                Some(v) => v,
                None => break,
            },
        };
        placed[v] = true;
        done += 1;
        for &w in &out[v] {
            if placed[w] {
                continue;
            }
            layer[w] = layer[w].max(layer[v] + 1);
            preds_left[w] = preds_left[w].saturating_sub(1);
            if preds_left[w] == 0 {
                ready.push_back(w);
            }
        }
    }
    layer
}

/// The layered graph: real nodes then dummies, with their layer, width and neighbours.
struct Grid {
    layer: Vec<usize>,
    width: Vec<f64>,
    up: Vec<Vec<usize>>,
    down: Vec<Vec<usize>>,
    /// Per input edge: the vertices from its upper end to its lower end, and whether the edge
    /// points up (its source is the lower end).
    chains: Vec<(Vec<usize>, bool)>,
}

fn grid(sizes: &[(f64, f64)], edges: &[(usize, usize)], layer: &[usize]) -> Grid {
    let n = sizes.len();
    let mut g = Grid {
        layer: layer.to_vec(),
        width: sizes.iter().map(|s| s.0).collect(),
        up: vec![Vec::new(); n],
        down: vec![Vec::new(); n],
        chains: Vec::with_capacity(edges.len()),
    };
    for &(a, b) in edges {
        if a >= n || b >= n || a == b || layer[a] == layer[b] {
            g.chains.push((
                vec![a.min(n.saturating_sub(1)), b.min(n.saturating_sub(1))],
                false,
            ));
            continue;
        }
        let upward = layer[a] > layer[b];
        let (top, bottom) = if upward { (b, a) } else { (a, b) };
        let mut chain = vec![top];
        for l in layer[top] + 1..layer[bottom] {
            let d = g.layer.len();
            g.layer.push(l);
            g.width.push(DUMMY_WIDTH);
            g.up.push(Vec::new());
            g.down.push(Vec::new());
            chain.push(d);
        }
        chain.push(bottom);
        for pair in chain.windows(2) {
            g.down[pair[0]].push(pair[1]);
            g.up[pair[1]].push(pair[0]);
        }
        g.chains.push((chain, upward));
    }
    g
}

/// Crossings between consecutive layers under `pos` (position of each vertex in its layer).
fn crossings(g: &Grid, rows: &[Vec<usize>], pos: &[usize]) -> usize {
    let mut total = 0;
    for row in rows {
        let mut segs: Vec<(usize, usize)> = Vec::new();
        for &v in row {
            for &w in &g.down[v] {
                segs.push((pos[v], pos[w]));
            }
        }
        for (i, a) in segs.iter().enumerate() {
            for b in &segs[i + 1..] {
                if (a.0 < b.0 && a.1 > b.1) || (a.0 > b.0 && a.1 < b.1) {
                    total += 1;
                }
            }
        }
    }
    total
}

fn positions(rows: &[Vec<usize>], count: usize) -> Vec<usize> {
    let mut pos = vec![0; count];
    for row in rows {
        for (i, &v) in row.iter().enumerate() {
            pos[v] = i;
        }
    }
    pos
}

/// Reorder `row` by the mean position of each vertex's neighbours (`nbrs`); a vertex without
/// neighbours keeps its place.
fn barycentre(row: &mut [usize], nbrs: &[Vec<usize>], pos: &[usize]) {
    let mut keyed: Vec<(f64, usize, usize)> = row
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let ns = &nbrs[v];
            let key = if ns.is_empty() {
                i as f64
            } else {
                ns.iter().map(|&w| pos[w] as f64).sum::<f64>() / ns.len() as f64
            };
            (key, i, v)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    for (slot, (_, _, v)) in row.iter_mut().zip(keyed) {
        *slot = v;
    }
}

fn order(g: &Grid) -> Vec<Vec<usize>> {
    let depth = g.layer.iter().max().map_or(0, |m| m + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (v, &l) in g.layer.iter().enumerate() {
        rows[l].push(v);
    }
    let count = g.layer.len();
    let mut pos = positions(&rows, count);
    let mut best = (crossings(g, &rows, &pos), rows.clone());
    for _ in 0..SWEEPS {
        if best.0 == 0 {
            break;
        }
        for l in 1..depth {
            barycentre(&mut rows[l], &g.up, &pos);
            pos = positions(&rows, count);
        }
        for l in (0..depth.saturating_sub(1)).rev() {
            barycentre(&mut rows[l], &g.down, &pos);
            pos = positions(&rows, count);
        }
        let c = crossings(g, &rows, &pos);
        if c < best.0 {
            best = (c, rows.clone());
        }
    }
    best.1
}

/// Place `row` at the desired centres `want`, in order, at least [`NODE_GAP`] apart.
fn place_row(row: &[usize], want: &[f64], width: &[f64], cx: &mut [f64]) {
    let sep = |a: usize, b: usize| (width[a] + width[b]) / 2.0 + NODE_GAP;
    let mut x: Vec<f64> = want.to_vec();
    for i in 1..row.len() {
        x[i] = x[i].max(x[i - 1] + sep(row[i - 1], row[i]));
    }
    // Pull back towards the wishes from the right, then restore the separation.
    for i in (0..row.len().saturating_sub(1)).rev() {
        x[i] = x[i]
            .min(x[i + 1] - sep(row[i], row[i + 1]))
            .max(want[i].min(x[i]));
    }
    for i in 1..row.len() {
        x[i] = x[i].max(x[i - 1] + sep(row[i - 1], row[i]));
    }
    for (&v, xi) in row.iter().zip(x) {
        cx[v] = xi;
    }
}

fn coordinates(g: &Grid, rows: &[Vec<usize>]) -> Vec<f64> {
    let mut cx = vec![0.0; g.layer.len()];
    for row in rows {
        let mut x = 0.0;
        for &v in row {
            cx[v] = x + g.width[v] / 2.0;
            x += g.width[v] + NODE_GAP;
        }
    }
    let mean = |ns: &[usize], cx: &[f64], own: f64| {
        if ns.is_empty() {
            own
        } else {
            ns.iter().map(|&w| cx[w]).sum::<f64>() / ns.len() as f64
        }
    };
    for _ in 0..ROUNDS {
        for row in rows.iter().skip(1) {
            let want: Vec<f64> = row.iter().map(|&v| mean(&g.up[v], &cx, cx[v])).collect();
            place_row(row, &want, &g.width, &mut cx);
        }
        for row in rows.iter().rev().skip(1) {
            let want: Vec<f64> = row.iter().map(|&v| mean(&g.down[v], &cx, cx[v])).collect();
            place_row(row, &want, &g.width, &mut cx);
        }
    }
    let left = (0..cx.len())
        .map(|v| cx[v] - g.width[v] / 2.0)
        .fold(f64::INFINITY, f64::min);
    let shift = if left.is_finite() { MARGIN - left } else { 0.0 };
    cx.iter_mut().for_each(|x| *x += shift);
    cx
}

/// Lay out `sizes.len()` nodes of the given `(width, height)` and the `edges` between them (by
/// index; an index out of range is drawn as a point at the first node).
pub fn layered(sizes: &[(f64, f64)], edges: &[(usize, usize)]) -> Layout {
    let n = sizes.len();
    if n == 0 {
        return Layout {
            nodes: Vec::new(),
            edges: edges.iter().map(|_| Vec::new()).collect(),
            layers: Vec::new(),
            width: 2.0 * MARGIN,
            height: 2.0 * MARGIN,
        };
    }
    let layer = assign_layers(n, edges);
    let g = grid(sizes, edges, &layer);
    let rows = order(&g);
    let cx = coordinates(&g, &rows);
    let mut top = Vec::with_capacity(rows.len());
    let mut bottom = Vec::with_capacity(rows.len());
    let mut y = MARGIN;
    for row in &rows {
        let h = row
            .iter()
            .filter(|&&v| v < n)
            .map(|&v| sizes[v].1)
            .fold(0.0, f64::max);
        top.push(y);
        bottom.push(y + h);
        y += h + LAYER_GAP;
    }
    let nodes: Vec<Placed> = (0..n)
        .map(|v| {
            let (w, h) = sizes[v];
            let l = layer[v];
            let slot = bottom[l] - top[l];
            Placed {
                x: cx[v] - w / 2.0,
                y: top[l] + (slot - h) / 2.0,
                w,
                h,
            }
        })
        .collect();
    let mid = |v: usize| (top[g.layer[v]] + bottom[g.layer[v]]) / 2.0;
    let polylines = g
        .chains
        .iter()
        .map(|(chain, upward)| {
            let (&first, &last) = match (chain.first(), chain.last()) {
                (Some(f), Some(l)) => (f, l),
                _ => return Vec::new(),
            };
            if layer.get(first) == layer.get(last) {
                // Same layer (or a self-loop): from one side to the other.
                let (a, b) = (nodes[first], nodes[last]);
                let (ax, bx) = if a.cx() <= b.cx() {
                    (a.x + a.w, b.x)
                } else {
                    (a.x, b.x + b.w)
                };
                return vec![(ax, a.y + a.h / 2.0), (bx, b.y + b.h / 2.0)];
            }
            let mut pts = Vec::with_capacity(chain.len());
            pts.push((cx[first], nodes[first].y + nodes[first].h));
            for &d in &chain[1..chain.len() - 1] {
                pts.push((cx[d], mid(d)));
            }
            pts.push((cx[last], nodes[last].y));
            if *upward {
                pts.reverse();
            }
            pts
        })
        .collect();
    let width = (0..cx.len())
        .map(|v| cx[v] + g.width[v] / 2.0)
        .fold(0.0, f64::max)
        + MARGIN;
    Layout {
        nodes,
        edges: polylines,
        layers: layer,
        width,
        height: y - LAYER_GAP + MARGIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn overlaps(a: &Placed, b: &Placed) -> bool {
        a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h
    }

    #[test]
    fn a_chain_with_a_long_edge_gets_layers_by_longest_path() {
        // 0 → 1 → 2 → 3 and 0 → 3: 3 sits below 2, the long edge bends through two dummies.
        let sizes = vec![(80.0, 40.0); 4];
        let l = layered(&sizes, &[(0, 1), (1, 2), (2, 3), (0, 3)]);
        assert_eq!(l.layers, vec![0, 1, 2, 3]);
        assert_eq!(l.edges[3].len(), 4, "{:?}", l.edges[3]);
        for w in l.nodes.windows(2) {
            assert!(w[0].y + w[0].h < w[1].y, "{:?}", l.nodes);
        }
    }

    #[test]
    fn boxes_never_overlap_and_edges_start_and_end_on_their_nodes() {
        // A diamond with a fan: 0 → 1..4 → 5, plus 2 → 6.
        let sizes: Vec<(f64, f64)> = (0..7).map(|i| (60.0 + 10.0 * i as f64, 40.0)).collect();
        let edges = [
            (0, 1),
            (0, 2),
            (0, 3),
            (0, 4),
            (1, 5),
            (2, 5),
            (3, 5),
            (4, 5),
            (2, 6),
        ];
        let l = layered(&sizes, &edges);
        for (i, a) in l.nodes.iter().enumerate() {
            for b in &l.nodes[i + 1..] {
                assert!(!overlaps(a, b), "{a:?} {b:?}");
            }
            assert!(a.x >= MARGIN - 1e-9 && a.x + a.w <= l.width + 1e-9);
        }
        for (e, &(a, b)) in edges.iter().enumerate() {
            let pts = &l.edges[e];
            let (from, to) = (l.nodes[a], l.nodes[b]);
            assert_eq!(pts[0], (from.cx(), from.y + from.h));
            assert_eq!(pts[pts.len() - 1], (to.cx(), to.y));
        }
    }

    #[test]
    fn a_cycle_is_laid_out_with_one_edge_pointing_up() {
        let sizes = vec![(50.0, 30.0); 3];
        let l = layered(&sizes, &[(0, 1), (1, 2), (2, 0)]);
        assert_eq!(l.layers, vec![0, 1, 2]);
        let back = &l.edges[2];
        assert!(back[0].1 < back[back.len() - 1].1 || back[0].1 > back[back.len() - 1].1);
        assert_eq!(back[0], (l.nodes[2].cx(), l.nodes[2].y), "leaves 2 upwards");
    }

    #[test]
    fn barycentre_sweeps_untangle_a_crossing() {
        // Layer 1 starts in input order 2, 3 but 2's child is on the right: the sweep swaps.
        let sizes = vec![(40.0, 20.0); 6];
        let edges = [(0, 3), (1, 2), (0, 4), (1, 5), (2, 5), (3, 4)];
        let l = layered(&sizes, &edges);
        let g = grid(&sizes, &edges, &l.layers);
        let rows = order(&g);
        assert_eq!(crossings(&g, &rows, &positions(&rows, g.layer.len())), 0);
    }
}
