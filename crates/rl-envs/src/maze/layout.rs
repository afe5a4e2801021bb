//! Maze layouts (gymnasium-robotics `maps.py`, D4RL maze2d) and their geometry.

use serde::{Deserialize, Serialize};

use crate::error::{EnvError, Result};

/// One cell of a maze map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    /// Free cell (`0`, `.`, `O`).
    Empty,
    /// Wall block (`1`, `#`).
    Wall,
    /// Free cell where episodes may start (`r`).
    Reset,
    /// Free cell where goals may be placed (`g`).
    Goal,
    /// Free cell for both (`c`).
    Combined,
}

/// A maze map: the D4RL maze2d layouts as gymnasium-robotics ships them, their "diverse"
/// variants, or a custom map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MazeLayout {
    /// `OPEN` (5 × 7, no inner walls; D4RL `maze2d-open`).
    Open,
    /// `U_MAZE` (5 × 5; D4RL `maze2d-umaze`).
    #[default]
    UMaze,
    /// `MEDIUM_MAZE` (8 × 8; D4RL `maze2d-medium`).
    Medium,
    /// `LARGE_MAZE` (9 × 12; D4RL `maze2d-large`).
    Large,
    /// `OPEN_DIVERSE_G`: one reset cell, goals everywhere else.
    OpenDiverseG,
    /// `OPEN_DIVERSE_GR`: every free cell is a reset and goal cell.
    OpenDiverseGr,
    /// `MEDIUM_MAZE_DIVERSE_G`.
    MediumDiverseG,
    /// `MEDIUM_MAZE_DIVERSE_GR`.
    MediumDiverseGr,
    /// `LARGE_MAZE_DIVERSE_G`.
    LargeDiverseG,
    /// `LARGE_MAZE_DIVERSE_GR`.
    LargeDiverseGr,
    /// A custom map, one string per row: `#`/`1` wall, `.`/`0`/`O` free, `r` reset, `g` goal,
    /// `c` both. Every row has the same length; the border should be walls.
    Custom {
        /// The rows, top (row 0) first.
        rows: Vec<String>,
    },
}

const OPEN: [&str; 5] = ["1111111", "1000001", "1000001", "1000001", "1111111"];
const OPEN_DIVERSE_G: [&str; 5] = ["1111111", "1rgggg1", "1ggggg1", "1ggggg1", "1111111"];
const OPEN_DIVERSE_GR: [&str; 5] = ["1111111", "1ccccc1", "1ccccc1", "1ccccc1", "1111111"];
const U_MAZE: [&str; 5] = ["11111", "10001", "11101", "10001", "11111"];
const MEDIUM: [&str; 8] =
    ["11111111", "10011001", "10010001", "11000111", "10010001", "10100101", "10001001", "11111111"];
const MEDIUM_DIVERSE_G: [&str; 8] =
    ["11111111", "1r011001", "100100g1", "11000111", "10010001", "1g100101", "10001g01", "11111111"];
const MEDIUM_DIVERSE_GR: [&str; 8] =
    ["11111111", "1c011001", "100100c1", "11000111", "10010001", "1c100101", "10001c01", "11111111"];
const LARGE: [&str; 9] = [
    "111111111111",
    "100001000001",
    "101101010101",
    "100000010001",
    "101111011101",
    "100101000001",
    "110101010111",
    "100100010001",
    "111111111111",
];
const LARGE_DIVERSE_G: [&str; 9] = [
    "111111111111",
    "1r0001g00001",
    "101101010101",
    "10000g0100g1",
    "101111011101",
    "10g101000001",
    "110101010111",
    "1001g0g10g01",
    "111111111111",
];
const LARGE_DIVERSE_GR: [&str; 9] = [
    "111111111111",
    "1c0001c00001",
    "101101010101",
    "10000c0100c1",
    "101111011101",
    "10c101000001",
    "110101010111",
    "1001c0c10c01",
    "111111111111",
];

impl MazeLayout {
    /// The rows of the map.
    pub fn rows(&self) -> Vec<String> {
        let fixed: &[&str] = match self {
            MazeLayout::Open => &OPEN,
            MazeLayout::UMaze => &U_MAZE,
            MazeLayout::Medium => &MEDIUM,
            MazeLayout::Large => &LARGE,
            MazeLayout::OpenDiverseG => &OPEN_DIVERSE_G,
            MazeLayout::OpenDiverseGr => &OPEN_DIVERSE_GR,
            MazeLayout::MediumDiverseG => &MEDIUM_DIVERSE_G,
            MazeLayout::MediumDiverseGr => &MEDIUM_DIVERSE_GR,
            MazeLayout::LargeDiverseG => &LARGE_DIVERSE_G,
            MazeLayout::LargeDiverseGr => &LARGE_DIVERSE_GR,
            MazeLayout::Custom { rows } => return rows.clone(),
        };
        fixed.iter().map(|r| (*r).to_owned()).collect()
    }

    /// The time limit gymnasium-robotics registers for this layout (`PointMaze_*-v3`): 300
    /// for the open and U mazes, 600 medium, 800 large; 0 (none) for custom maps.
    pub fn registered_max_steps(&self) -> usize {
        match self {
            MazeLayout::Open | MazeLayout::OpenDiverseG | MazeLayout::OpenDiverseGr | MazeLayout::UMaze => 300,
            MazeLayout::Medium | MazeLayout::MediumDiverseG | MazeLayout::MediumDiverseGr => 600,
            MazeLayout::Large | MazeLayout::LargeDiverseG | MazeLayout::LargeDiverseGr => 800,
            MazeLayout::Custom { .. } => 0,
        }
    }

    /// The D4RL maze2d goal cell `(row, col)` of this layout (`maze2d-open`: (2, 3),
    /// `-umaze`: (1, 1), `-medium`: (6, 6), `-large`: (7, 9)), if it is one of D4RL's.
    pub fn d4rl_goal_cell(&self) -> Option<(usize, usize)> {
        match self {
            MazeLayout::Open => Some((2, 3)),
            MazeLayout::UMaze => Some((1, 1)),
            MazeLayout::Medium => Some((6, 6)),
            MazeLayout::Large => Some((7, 9)),
            _ => None,
        }
    }
}

/// A parsed maze: its cells, scaling and the reset and goal locations gymnasium-robotics
/// derives from it (`Maze.make_maze`), in its frame: cell `(i, j)` has its centre at
/// `x = (j + 0.5) s − width·s/2`, `y = length·s/2 − (i + 0.5) s`.
#[derive(Debug, Clone, PartialEq)]
pub struct Maze {
    cells: Vec<Vec<Cell>>,
    scaling: f64,
    x_center: f64,
    y_center: f64,
    goal_locations: Vec<[f64; 2]>,
    reset_locations: Vec<[f64; 2]>,
    walls: Vec<[f64; 2]>,
}

impl Maze {
    /// Parses `layout` with cell size `scaling`.
    ///
    /// # Errors
    /// [`EnvError::InvalidParameter`] for an empty or ragged map, an unknown character, a map
    /// with no free cell or a non-positive scaling.
    pub fn new(layout: &MazeLayout, scaling: f64) -> Result<Self> {
        if !(scaling.is_finite() && scaling > 0.0) {
            return Err(EnvError::invalid("maze_size_scaling", scaling, "must be finite and > 0"));
        }
        let rows = layout.rows();
        let width = rows.first().map(|r| r.chars().count()).unwrap_or(0);
        if rows.is_empty() || width == 0 {
            return Err(EnvError::invalid("layout", "[]", "the map is empty"));
        }
        let mut cells = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            if row.chars().count() != width {
                return Err(EnvError::invalid(
                    format!("layout.rows[{i}]"),
                    row,
                    format!("has {} cells, row 0 has {width}", row.chars().count()),
                ));
            }
            let parsed = row
                .chars()
                .map(|c| match c {
                    '1' | '#' => Ok(Cell::Wall),
                    '0' | '.' | 'O' | ' ' => Ok(Cell::Empty),
                    'r' | 'R' => Ok(Cell::Reset),
                    'g' | 'G' => Ok(Cell::Goal),
                    'c' | 'C' => Ok(Cell::Combined),
                    other => Err(EnvError::invalid(
                        format!("layout.rows[{i}]"),
                        row,
                        format!("unknown cell '{other}' (use # . r g c or 1 0)"),
                    )),
                })
                .collect::<Result<Vec<Cell>>>()?;
            cells.push(parsed);
        }
        let length = cells.len();
        let x_center = width as f64 / 2.0 * scaling;
        let y_center = length as f64 / 2.0 * scaling;
        let (mut goals, mut resets, mut combined, mut empty, mut walls) = (vec![], vec![], vec![], vec![], vec![]);
        for (i, row) in cells.iter().enumerate() {
            for (j, c) in row.iter().enumerate() {
                let x = (j as f64 + 0.5) * scaling - x_center;
                let y = y_center - (i as f64 + 0.5) * scaling;
                match c {
                    Cell::Wall => walls.push([x, y]),
                    Cell::Reset => resets.push([x, y]),
                    Cell::Goal => goals.push([x, y]),
                    Cell::Combined => combined.push([x, y]),
                    Cell::Empty => empty.push([x, y]),
                }
            }
        }
        // gymnasium-robotics' fallbacks when the map names no goal / reset cells
        if goals.is_empty() && resets.is_empty() && combined.is_empty() {
            combined = empty;
        } else if resets.is_empty() && combined.is_empty() {
            resets = empty;
        } else if goals.is_empty() && combined.is_empty() {
            goals = empty;
        }
        goals.extend_from_slice(&combined);
        resets.extend_from_slice(&combined);
        if goals.is_empty() || resets.is_empty() {
            return Err(EnvError::invalid("layout", format!("{rows:?}"), "needs at least one free cell"));
        }
        Ok(Self { cells, scaling, x_center, y_center, goal_locations: goals, reset_locations: resets, walls })
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.cells.len()
    }

    /// Number of columns.
    pub fn n_cols(&self) -> usize {
        self.cells.first().map_or(0, Vec::len)
    }

    /// Cell size.
    pub fn scaling(&self) -> f64 {
        self.scaling
    }

    /// The cell at `(row, col)`, if inside the map.
    pub fn cell(&self, row: usize, col: usize) -> Option<Cell> {
        self.cells.get(row).and_then(|r| r.get(col)).copied()
    }

    /// Whether `(row, col)` is inside the map and not a wall.
    pub fn is_free(&self, row: usize, col: usize) -> bool {
        matches!(self.cell(row, col), Some(c) if c != Cell::Wall)
    }

    /// The centre of cell `(row, col)`.
    pub fn cell_to_xy(&self, row: usize, col: usize) -> [f64; 2] {
        [(col as f64 + 0.5) * self.scaling - self.x_center, self.y_center - (row as f64 + 0.5) * self.scaling]
    }

    /// The cell containing `xy` as `(row, col)` (may lie outside the map for far-away points).
    pub fn xy_to_cell(&self, xy: [f64; 2]) -> (i64, i64) {
        let i = ((self.y_center - xy[1]) / self.scaling).floor() as i64;
        let j = ((xy[0] + self.x_center) / self.scaling).floor() as i64;
        (i, j)
    }

    /// `xy` of continuous `(row, col)` coordinates.
    pub(crate) fn rowcol_f_to_xy(&self, rc: [f64; 2]) -> [f64; 2] {
        [(rc[1] + 0.5) * self.scaling - self.x_center, self.y_center - (rc[0] + 0.5) * self.scaling]
    }

    /// Centres of the cells goals are drawn from.
    pub fn goal_locations(&self) -> &[[f64; 2]] {
        &self.goal_locations
    }

    /// Centres of the cells episodes start from.
    pub fn reset_locations(&self) -> &[[f64; 2]] {
        &self.reset_locations
    }

    /// Centres of the wall blocks (each a square of side `scaling`).
    pub fn walls(&self) -> &[[f64; 2]] {
        &self.walls
    }

    /// Distance from `xy` to the nearest wall block's surface (negative inside a block).
    pub fn wall_clearance(&self, xy: [f64; 2]) -> f64 {
        let h = 0.5 * self.scaling;
        self.walls
            .iter()
            .map(|w| {
                let dx = (xy[0] - w[0]).abs() - h;
                let dy = (xy[1] - w[1]).abs() - h;
                let outside = (dx.max(0.0).powi(2) + dy.max(0.0).powi(2)).sqrt();
                outside + dx.max(dy).min(0.0)
            })
            .fold(f64::INFINITY, f64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn umaze_geometry_matches_gymnasium_robotics() {
        let m = Maze::new(&MazeLayout::UMaze, 1.0).unwrap();
        assert_eq!((m.n_rows(), m.n_cols()), (5, 5));
        // all 7 free cells are both reset and goal cells (no r/g/c in U_MAZE)
        assert_eq!(m.goal_locations().len(), 7);
        assert_eq!(m.reset_locations().len(), 7);
        assert_eq!(m.goal_locations()[0], [-1.0, 1.0]);
        assert_eq!(m.cell_to_xy(3, 1), [-1.0, -1.0]);
        assert_eq!(m.xy_to_cell([-1.0, -1.0]), (3, 1));
        assert_eq!(m.walls().len(), 25 - 7);
        assert!((m.wall_clearance([-1.0, 1.0]) - 0.5).abs() < 1e-12);
        assert!(m.wall_clearance([-1.0, 0.2]) < 0.0);
        assert_eq!(m.rowcol_f_to_xy([3.0, 1.0]), [-1.0, -1.0]);
        let xy = m.rowcol_f_to_xy([2.8, 0.8]);
        assert!((xy[0] + 1.2).abs() < 1e-12 && (xy[1] + 0.8).abs() < 1e-12, "{xy:?}");
    }

    #[test]
    fn diverse_maps_and_custom_maps() {
        let m = Maze::new(&MazeLayout::LargeDiverseG, 1.0).unwrap();
        assert_eq!(m.reset_locations().len(), 1);
        assert_eq!(m.goal_locations().len(), 7);
        let c = MazeLayout::Custom { rows: vec!["###".into(), "#.#".into(), "###".into()] };
        assert_eq!(Maze::new(&c, 1.0).unwrap().goal_locations(), &[[0.0, 0.0]]);
        let ragged = MazeLayout::Custom { rows: vec!["###".into(), "#.".into()] };
        assert!(Maze::new(&ragged, 1.0).is_err());
        let unknown = MazeLayout::Custom { rows: vec!["#x#".into()] };
        assert!(Maze::new(&unknown, 1.0).unwrap_err().to_string().contains("unknown cell"));
        let walls = MazeLayout::Custom { rows: vec!["###".into()] };
        assert!(Maze::new(&walls, 1.0).is_err());
        assert!(Maze::new(&MazeLayout::Open, 0.0).is_err());
    }
}
