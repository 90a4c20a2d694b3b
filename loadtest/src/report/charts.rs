//! SVG line charts of a run's cells (plotters, no fonts or network needed).
//!
//! A chart holds at most [`MAX_SERIES`] lines, so that each keeps a colour
//! of its own: when more combinations vary, the chart is drawn as small
//! multiples, one panel per value of the dimensions left over. Lines are
//! named in words ("batch, 50 members, publishing off"), the run's context
//! (pool, cell length, machine) is the subtitle, and a point whose requests
//! failed is drawn as a red cross with its error share beside it, so a
//! failing cell cannot hide behind a good-looking latency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use plotters::prelude::*;

use crate::error::LoadError;
use crate::load::scenario::Scenario;
use crate::report::results::CellResult;

/// Most lines in one panel.
pub const MAX_SERIES: usize = 6;

const PALETTE: [RGBColor; MAX_SERIES] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// Failed requests are drawn in this colour, whatever their line's.
const ERROR_RED: RGBColor = RGBColor(214, 39, 40);

/// One point: x, y, and the share of the cell's requests that failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The x value.
    pub x: f64,
    /// The y value.
    pub y: f64,
    /// Failed requests over all requests (0 when none failed).
    pub error_share: f64,
}

/// One line: its name and its points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name in words.
    pub name: String,
    /// Its points, in any order.
    pub points: Vec<Point>,
}

/// One panel of a chart: a title (empty when the chart has one panel) and
/// its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// What the panel's cells share.
    pub title: String,
    /// At most [`MAX_SERIES`] lines.
    pub series: Vec<Series>,
}

/// A chart's text.
#[derive(Debug, Clone)]
pub struct Labels<'a> {
    /// The title.
    pub title: &'a str,
    /// The run's context: pool, cell length, machine.
    pub subtitle: &'a str,
    /// The x axis.
    pub x: &'a str,
    /// The y axis.
    pub y: &'a str,
}

/// A dimension of the grid that can name a line or a panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// The server variant.
    Server,
    /// The pool size.
    Pool,
    /// The scenario.
    Scenario,
    /// The insert strategy.
    Strategy,
    /// Members per chat.
    Members,
    /// The publish mode.
    Mode,
    /// Rows per import job.
    ImportRows,
    /// The database's distance.
    Rtt,
}

impl Dimension {
    /// The cell's value of this dimension, in words.
    fn words(self, c: &CellResult, default_pool: u32) -> String {
        match self {
            Self::Server => format!("server {}", c.server),
            Self::Pool if c.pool_size == 0 => "the server's pool".to_owned(),
            Self::Pool if c.pool_size == default_pool => {
                format!("pool of {} (the default)", c.pool_size)
            }
            Self::Pool => format!("pool of {}", c.pool_size),
            Self::Scenario => c.scenario.clone(),
            Self::Strategy if c.strategy == "-" => "the server's strategy".to_owned(),
            Self::Strategy => c.strategy.clone(),
            Self::Members => format!("{} members", c.members),
            Self::Mode if c.publish_mode == "-" => "the server's publish mode".to_owned(),
            Self::Mode => format!("publishing {}", c.publish_mode),
            Self::ImportRows => {
                let rows = import_figures(c).map_or(0, |(rows, _)| rows);
                format!("jobs of {rows} rows")
            }
            Self::Rtt => format!(
                "PostgreSQL {} ms away",
                crate::servers::reach::show_ms(c.db_rtt_ms)
            ),
        }
    }
}

/// chatlab's default pool size on this machine, named in the lines.
pub(crate) fn default_pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    chatlab_domain::limits::hikari_pool_size(cores)
}

/// An import cell's rows per job and parallelism.
fn import_figures(c: &CellResult) -> Option<(usize, usize)> {
    match c.scenario.parse::<Scenario>() {
        Ok(Scenario::Import {
            rows, parallelism, ..
        }) => Some((rows, parallelism)),
        _ => None,
    }
}

/// Failed requests over all requests (`requests` counts both).
fn error_share(c: &CellResult) -> f64 {
    c.errors as f64 / c.requests.max(1) as f64
}

/// Splits `cells` into panels of at most [`MAX_SERIES`] lines. `dims` are
/// the candidate dimensions, most line-worthy first; those with one value
/// across the cells name nothing. Lines take the leading dimensions while
/// their combinations fit; the rest become panels.
pub fn panels(
    cells: &[CellResult],
    dims: &[Dimension],
    point: impl Fn(&CellResult) -> (f64, f64),
) -> Vec<Panel> {
    let default_pool = default_pool_size();
    let varying: Vec<Dimension> = dims
        .iter()
        .copied()
        .filter(|d| {
            cells
                .iter()
                .map(|c| d.words(c, default_pool))
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        })
        .collect();
    let combinations = |ds: &[Dimension]| {
        cells
            .iter()
            .map(|c| key(c, ds, default_pool))
            .collect::<BTreeSet<_>>()
            .len()
    };
    // As many leading dimensions name lines as fit in one panel (at least
    // one, so a lone dimension with too many values still draws).
    let mut split = varying.len();
    while split > 1 && combinations(&varying[..split]) > MAX_SERIES {
        split -= 1;
    }
    let (line_dims, panel_dims) = varying.split_at(split.min(varying.len()));
    let mut by_panel: BTreeMap<String, BTreeMap<String, Vec<Point>>> = BTreeMap::new();
    for c in cells {
        let (x, y) = point(c);
        let line = key(c, line_dims, default_pool);
        by_panel
            .entry(key(c, panel_dims, default_pool))
            .or_default()
            .entry(if line.is_empty() {
                "all cells".to_owned()
            } else {
                line
            })
            .or_default()
            .push(Point {
                x,
                y,
                error_share: error_share(c),
            });
    }
    by_panel
        .into_iter()
        .flat_map(|(title, lines)| {
            // A lone dimension with more values than colours: several panels.
            let lines: Vec<Series> = lines
                .into_iter()
                .map(|(name, points)| Series { name, points })
                .collect();
            let chunks: Vec<Vec<Series>> =
                lines.chunks(MAX_SERIES).map(<[Series]>::to_vec).collect();
            let parts = chunks.len();
            chunks
                .into_iter()
                .enumerate()
                .map(move |(i, series)| Panel {
                    title: if parts > 1 {
                        format!("{title} ({} of {parts})", i + 1)
                    } else {
                        title.clone()
                    },
                    series,
                })
        })
        .collect()
}

fn key(c: &CellResult, dims: &[Dimension], default_pool: u32) -> String {
    dims.iter()
        .map(|d| d.words(c, default_pool))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Draws `panels` into one SVG file, in a grid of at most two columns.
pub fn draw(path: &Path, labels: &Labels<'_>, panels: &[Panel]) -> Result<(), LoadError> {
    let err = |e: &dyn std::fmt::Display| LoadError::Chart {
        name: path.display().to_string(),
        message: e.to_string(),
    };
    let count = panels.len().max(1);
    let cols = if count == 1 { 1 } else { 2 };
    let rows = count.div_ceil(cols);
    let subtitle = wrap(labels.subtitle, if cols == 1 { 120 } else { 240 });
    let header_height = 45 + 18 * subtitle.len() as u32;
    let (width, height) = (820 * cols as u32, header_height + 460 * rows as u32);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (header, body) = root.split_vertically(header_height);
    header
        .draw(&Text::new(
            labels.title.to_owned(),
            (15, 10),
            ("sans-serif", 22).into_font(),
        ))
        .map_err(|e| err(&e))?;
    for (i, line) in subtitle.iter().enumerate() {
        header
            .draw(&Text::new(
                line.clone(),
                (15, 42 + 18 * i as i32),
                ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90)),
            ))
            .map_err(|e| err(&e))?;
    }
    let areas = body.split_evenly((rows, cols));
    for (area, panel) in areas.iter().zip(panels) {
        draw_panel(area, labels, panel).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

/// `text` in lines of at most `width` characters, broken after "; " where
/// it can be and between words where it must.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in text.split("; ") {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 2 + part.chars().count() <= width => {
                line.push_str("; ");
                line.push_str(part);
            }
            _ => lines.push(part.to_owned()),
        }
    }
    lines
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    labels: &Labels<'_>,
    panel: &Panel,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let points = panel.series.iter().flat_map(|s| s.points.iter());
    let (mut x_max, mut y_max) = (0.0f64, 0.0f64);
    for p in points {
        x_max = x_max.max(p.x);
        y_max = y_max.max(p.y);
    }
    let x_max = if x_max > 0.0 { x_max * 1.05 } else { 1.0 };
    // Headroom above the data for the legend, which then covers none of it.
    let y_max = if y_max > 0.0 { y_max * 1.45 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc(labels.x)
        .y_desc(labels.y)
        .draw()?;
    for (i, series) in panel.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<(f64, f64)> = series.points.iter().map(|p| (p.x, p.y)).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(series.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(
            series
                .points
                .iter()
                .filter(|p| p.error_share == 0.0)
                .map(|p| Circle::new((p.x, p.y), 3, color.filled())),
        )?;
        // Where requests failed: a red cross, and how many.
        chart.draw_series(
            series
                .points
                .iter()
                .filter(|p| p.error_share > 0.0)
                .map(|p| {
                    EmptyElement::at((p.x, p.y))
                        + Cross::new((0, 0), 5, ERROR_RED.stroke_width(2))
                        + Text::new(
                            format!("{:.1}% failed", p.error_share * 100.0),
                            (-80, -18),
                            ("sans-serif", 11).into_font().color(&ERROR_RED),
                        )
                }),
        )?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
}

/// The experiment's standard charts: throughput, p95 and peak pending
/// requests against VUs, connection use time against members, and for
/// import jobs rows per second against parallelism. `subtitle` is the
/// run's context. Returns the file names.
pub fn standard(
    dir: &Path,
    cells: &[CellResult],
    subtitle: &str,
) -> Result<Vec<String>, LoadError> {
    let mut out = Drawn {
        dir,
        subtitle,
        written: Vec::new(),
    };
    let vus: BTreeSet<usize> = cells.iter().map(|c| c.vus).collect();
    if vus.len() > 1 {
        vus_charts(&mut out, cells)?;
    }
    members_chart(&mut out, cells, &vus)?;
    rtt_charts(&mut out, cells)?;
    import_chart(&mut out, cells)?;
    Ok(out.written)
}

/// Where charts go, the run's context under each title, and the files
/// drawn so far.
struct Drawn<'a> {
    dir: &'a Path,
    subtitle: &'a str,
    written: Vec<String>,
}

impl Drawn<'_> {
    /// Draws `panels` into `file` and counts it written.
    fn chart(
        &mut self,
        file: &str,
        title: &str,
        x: &str,
        y: &str,
        panels: Vec<Panel>,
    ) -> Result<(), LoadError> {
        draw(
            &self.dir.join(file),
            &Labels {
                title,
                subtitle: self.subtitle,
                x,
                y,
            },
            &panels,
        )?;
        self.written.push(file.to_owned());
        Ok(())
    }
}

/// The dimensions a chart against VUs draws as lines or panels.
const LINE_DIMS: [Dimension; 7] = [
    Dimension::Strategy,
    Dimension::Mode,
    Dimension::Members,
    Dimension::Pool,
    Dimension::Server,
    Dimension::Scenario,
    Dimension::Rtt,
];

/// Throughput, p95 and peak pending requests against VUs.
fn vus_charts(out: &mut Drawn<'_>, cells: &[CellResult]) -> Result<(), LoadError> {
    out.chart(
        "throughput_vs_vus.svg",
        "Throughput vs virtual users",
        "virtual users",
        "requests per second",
        panels(cells, &LINE_DIMS, |c| (c.vus as f64, c.throughput_rps)),
    )?;
    out.chart(
        "p95_vs_vus.svg",
        "p95 latency vs virtual users (red crosses: cells whose requests failed)",
        "virtual users",
        "p95 latency (ms)",
        panels(cells, &LINE_DIMS, |c| (c.vus as f64, c.p95_ms)),
    )?;
    out.chart(
        "pending_vs_vus.svg",
        "Requests waiting for a connection (peak) vs virtual users",
        "virtual users",
        "pending requests, peak per server",
        panels(cells, &LINE_DIMS, |c| (c.vus as f64, c.pending_max)),
    )?;
    Ok(())
}

/// Connection use time against members, at the grid's most VUs.
fn members_chart(
    out: &mut Drawn<'_>,
    cells: &[CellResult],
    vus: &BTreeSet<usize>,
) -> Result<(), LoadError> {
    use Dimension::*;
    let members: BTreeSet<usize> = cells.iter().map(|c| c.members).collect();
    if members.len() > 1 {
        let top_vus = vus.iter().max().copied().unwrap_or(0);
        let at_top: Vec<CellResult> = cells.iter().filter(|c| c.vus == top_vus).cloned().collect();
        out.chart(
            "use_time_vs_members.svg",
            &format!("Connection use time vs members ({top_vus} VUs)"),
            "members per chat",
            "mean connection use time (ms)",
            panels(&at_top, &[Strategy, Mode, Pool, Server, Scenario], |c| {
                (c.members as f64, c.use_time_mean_ms)
            }),
        )?;
    }
    Ok(())
}

/// Throughput, connection held and p95 against the database's round trip.
fn rtt_charts(out: &mut Drawn<'_>, cells: &[CellResult]) -> Result<(), LoadError> {
    use Dimension::*;
    let rtts: BTreeSet<u64> = cells.iter().map(|c| c.db_rtt_ms.to_bits()).collect();
    if rtts.len() > 1 {
        let dims = [Strategy, Server, Mode, Members, Pool, Scenario];
        out.chart(
            "throughput_vs_rtt.svg",
            "Throughput vs the database's round-trip time",
            "round-trip time added between the servers and PostgreSQL (ms)",
            "requests per second",
            panels(cells, &dims, |c| (c.db_rtt_ms, c.throughput_rps)),
        )?;
        out.chart(
            "use_time_vs_rtt.svg",
            "Connection held per request vs the database's round-trip time",
            "round-trip time added between the servers and PostgreSQL (ms)",
            "mean connection use time (ms)",
            panels(cells, &dims, |c| (c.db_rtt_ms, c.use_time_mean_ms)),
        )?;
        out.chart(
            "p95_vs_rtt.svg",
            "p95 latency vs the database's round-trip time (red crosses: cells whose requests failed)",
            "round-trip time added between the servers and PostgreSQL (ms)",
            "p95 latency (ms)",
            panels(cells, &dims, |c| (c.db_rtt_ms, c.p95_ms)),
        )?;
    }
    Ok(())
}

/// Import jobs' rows per second against their parallelism.
fn import_chart(out: &mut Drawn<'_>, cells: &[CellResult]) -> Result<(), LoadError> {
    use Dimension::*;
    let imports: Vec<CellResult> = cells
        .iter()
        .filter(|c| import_figures(c).is_some())
        .cloned()
        .collect();
    let parallelisms: BTreeSet<usize> = imports
        .iter()
        .filter_map(import_figures)
        .map(|(_, p)| p)
        .collect();
    if parallelisms.len() > 1 {
        out.chart(
            "import_rows_per_s_vs_parallelism.svg",
            "Import jobs: rows written per second vs parallelism",
            "chunks in flight (parallelism)",
            "rows per second",
            panels(&imports, &[Pool, Server, ImportRows, Strategy], |c| {
                let parallelism = import_figures(c).map_or(0, |(_, p)| p);
                (parallelism as f64, c.rows_per_s)
            }),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(strategy: &str, members: usize, vus: usize, pool: u32, errors: u64) -> CellResult {
        CellResult {
            strategy: strategy.into(),
            publish_mode: "off".into(),
            members,
            vus,
            pool_size: pool,
            requests: 100,
            errors,
            throughput_rps: (vus * 10 / members) as f64,
            p95_ms: members as f64,
            use_time_mean_ms: members as f64 / 10.0,
            ..CellResult::default()
        }
    }

    #[test]
    fn lines_are_named_in_words_and_one_panel_suffices_when_few_vary() {
        let cells: Vec<CellResult> = ["per_row", "batch"]
            .iter()
            .flat_map(|s| [20, 50].map(|m| (s, m)))
            .flat_map(|(s, m)| [30, 60].map(|v| cell(s, m, v, 20, 0)))
            .collect();
        let p = panels(&cells, &[Dimension::Strategy, Dimension::Members], |c| {
            (c.vus as f64, c.throughput_rps)
        });
        assert_eq!(p.len(), 1);
        let names: Vec<&str> = p[0].series.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&"batch, 20 members"), "{names:?}");
        assert_eq!(p[0].series.len(), 4);
    }

    #[test]
    fn more_than_six_lines_become_small_multiples_by_the_dimension_left_over() {
        // 3 strategies x 3 member counts x 4 pools = 36 lines: strategies x
        // members (9) do not fit in one panel, so strategies name the lines
        // and every (members, pool) pair is a panel.
        let mut cells = Vec::new();
        for s in ["per_row", "batch", "unnest"] {
            for m in [10, 20, 50] {
                for pool in [5, 10, 20, 40] {
                    for v in [10, 50] {
                        cells.push(cell(s, m, v, pool, 0));
                    }
                }
            }
        }
        let p = panels(
            &cells,
            &[Dimension::Strategy, Dimension::Members, Dimension::Pool],
            |c| (c.vus as f64, c.p95_ms),
        );
        assert_eq!(p.len(), 12);
        assert!(p.iter().all(|panel| panel.series.len() <= MAX_SERIES));
        assert!(
            p.iter()
                .any(|panel| panel.title == "10 members, pool of 40"),
            "{:?}",
            p.iter().map(|x| &x.title).collect::<Vec<_>>()
        );
    }

    #[test]
    fn failed_requests_are_marked_where_they_happened() {
        let dir = std::env::temp_dir().join(format!("chatlab-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cells = vec![cell("batch", 50, 30, 0, 0), cell("batch", 50, 400, 0, 18)];
        let files = standard(&dir, &cells, "pool: the server's; 10 s a cell").unwrap();
        assert_eq!(files.len(), 3);
        let p95 = std::fs::read_to_string(dir.join("p95_vs_vus.svg")).unwrap();
        assert!(p95.contains("18.0% failed"), "the failing cell is marked");
        assert!(p95.contains("10 s a cell"), "the subtitle is drawn");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
