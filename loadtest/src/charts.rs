//! SVG line charts of a run's cells (plotters, no fonts or network needed).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::report::CellResult;
use crate::scenario::Scenario;

/// One line: its name and its points.
pub type Series = (String, Vec<(f64, f64)>);

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Draws `series` into an SVG file.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), String> {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_max, mut y_max) = (0.0f64, 0.0f64);
    for &(x, y) in points {
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    let x_max = if x_max > 0.0 { x_max * 1.05 } else { 1.0 };
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut pts = pts.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                pts.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn group(
    cells: &[CellResult],
    key: impl Fn(&CellResult) -> String,
    point: impl Fn(&CellResult) -> (f64, f64),
) -> Vec<Series> {
    let mut map: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for c in cells {
        map.entry(key(c)).or_default().push(point(c));
    }
    map.into_iter().collect()
}

/// chatlab's default pool size on this machine, marked in chart legends.
fn default_pool_size() -> u32 {
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

/// A line's name: the dimensions that vary across `cells`, except the one
/// on the x axis.
fn line_namer(cells: &[CellResult]) -> impl Fn(&CellResult) -> String {
    let varies = |f: &dyn Fn(&CellResult) -> String| {
        cells
            .iter()
            .map(f)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
    };
    let server = varies(&|c| c.server.clone());
    let pool = varies(&|c| c.pool_size.to_string());
    let scenario = varies(&|c| c.scenario.clone());
    let strategy = varies(&|c| c.strategy.clone()) || !(server || pool || scenario);
    let members = varies(&|c| c.members.to_string());
    let mode = varies(&|c| c.publish_mode.clone());
    let default_pool = default_pool_size();
    move |c: &CellResult| {
        let mut parts = Vec::new();
        if server {
            parts.push(c.server.clone());
        }
        if pool {
            parts.push(if c.pool_size == default_pool {
                format!("pool={} (default: cores×2+1)", c.pool_size)
            } else {
                format!("pool={}", c.pool_size)
            });
        }
        if scenario {
            parts.push(c.scenario.clone());
        }
        if strategy {
            parts.push(c.strategy.clone());
        }
        if members {
            parts.push(format!("m={}", c.members));
        }
        if mode {
            parts.push(c.publish_mode.clone());
        }
        parts.join(" ")
    }
}

/// The experiment's standard charts: throughput, p95 and peak pending
/// requests against VUs (one line per combination of the dimensions that
/// vary), connection use time against members, and for import jobs rows
/// per second against parallelism. Returns the file names.
pub fn standard(dir: &Path, cells: &[CellResult]) -> Result<Vec<String>, String> {
    let line = line_namer(cells);
    let mut written = Vec::new();
    let vus_values: std::collections::BTreeSet<usize> = cells.iter().map(|c| c.vus).collect();
    if vus_values.len() > 1 {
        line_chart(
            &dir.join("throughput_vs_vus.svg"),
            "Throughput vs virtual users",
            "virtual users",
            "requests per second",
            &group(cells, &line, |c| (c.vus as f64, c.throughput_rps)),
        )?;
        line_chart(
            &dir.join("p95_vs_vus.svg"),
            "p95 latency vs virtual users",
            "virtual users",
            "p95 latency (ms)",
            &group(cells, &line, |c| (c.vus as f64, c.p95_ms)),
        )?;
        line_chart(
            &dir.join("pending_vs_vus.svg"),
            "Requests waiting for a connection (peak) vs virtual users",
            "virtual users",
            "pending requests, peak per server",
            &group(cells, &line, |c| (c.vus as f64, c.pending_max)),
        )?;
        written.push("throughput_vs_vus.svg".to_owned());
        written.push("p95_vs_vus.svg".to_owned());
        written.push("pending_vs_vus.svg".to_owned());
    }
    let members: std::collections::BTreeSet<usize> = cells.iter().map(|c| c.members).collect();
    if members.len() > 1 {
        let top_vus = vus_values.iter().max().copied().unwrap_or(0);
        let at_top: Vec<CellResult> = cells.iter().filter(|c| c.vus == top_vus).cloned().collect();
        line_chart(
            &dir.join("use_time_vs_members.svg"),
            &format!("Connection use time vs members ({top_vus} VUs)"),
            "members per chat",
            "mean connection use time (ms)",
            &group(
                &at_top,
                |c| format!("{} {}", c.strategy, c.publish_mode),
                |c| (c.members as f64, c.use_time_mean_ms),
            ),
        )?;
        written.push("use_time_vs_members.svg".to_owned());
    }
    let imports: Vec<CellResult> = cells
        .iter()
        .filter(|c| import_figures(c).is_some())
        .cloned()
        .collect();
    let parallelisms: std::collections::BTreeSet<usize> = imports
        .iter()
        .filter_map(import_figures)
        .map(|(_, p)| p)
        .collect();
    if parallelisms.len() > 1 {
        let series: Vec<Series> = group(
            &imports,
            |c| {
                let (rows, _) = import_figures(c).unwrap_or_default();
                format!("{} rows={rows} pool={}", c.server, c.pool_size)
            },
            |c| {
                let (_, parallelism) = import_figures(c).unwrap_or_default();
                (parallelism as f64, c.rows_per_s)
            },
        );
        line_chart(
            &dir.join("import_rows_per_s_vs_parallelism.svg"),
            "Import jobs: rows written per second vs parallelism",
            "chunks in flight (parallelism)",
            "rows per second",
            &series,
        )?;
        written.push("import_rows_per_s_vs_parallelism.svg".to_owned());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_svg_charts_for_a_grid() {
        let dir = std::env::temp_dir().join(format!("chatlab-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cells = Vec::new();
        for strategy in ["per_row", "batch"] {
            for members in [20, 50] {
                for vus in [30, 60] {
                    cells.push(CellResult {
                        strategy: strategy.into(),
                        publish_mode: "off".into(),
                        members,
                        vus,
                        throughput_rps: (vus * 10 / members) as f64,
                        p95_ms: members as f64,
                        use_time_mean_ms: members as f64 / 10.0,
                        ..CellResult::default()
                    });
                }
            }
        }
        let files = standard(&dir, &cells).unwrap();
        assert_eq!(files.len(), 4);
        for f in files {
            let svg = std::fs::read_to_string(dir.join(&f)).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("per_row"), "{f}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
