//! docs/bench-chart.svg: kinformer's advantage on every scenario's headline figure.

use std::fmt::Write as _;

use super::{
    report::{ScenarioResults, format_ratio},
    scenarios::Peer,
};

/// The headline bars of the chart: (scenario, other implementation, kinformer's advantage).
pub(super) fn chart_bars(results: &[ScenarioResults]) -> Vec<(String, String, f64)> {
    let mut bars = Vec::new();
    for scenario in results {
        for (index, case) in scenario.scenario.cases.iter().enumerate() {
            if case.peer == Peer::Kinformer {
                continue;
            }
            if let Some(ratio) = scenario
                .headline_advantage(index)
                .filter(|ratio| ratio.is_finite() && *ratio > 0.0)
            {
                bars.push((scenario.scenario.name.to_owned(), case.label.clone(), ratio));
            }
        }
    }
    bars
}

/// A horizontal bar chart of kinformer's advantage, log scale, 1x marked.
pub(super) fn chart_svg(bars: &[(String, String, f64)]) -> String {
    const ROW: f64 = 22.0;
    const LEFT: f64 = 330.0;
    const WIDTH: f64 = 420.0;
    // Log scale from 1/16x to 64x: losses are as visible as wins.
    let (low, high) = (-4.0f64, 6.0f64);
    let x = |ratio: f64| LEFT + (ratio.log2().clamp(low, high) - low) / (high - low) * WIDTH;
    let height = 60.0 + ROW * bars.len() as f64;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="12">"#,
        w = LEFT + WIDTH + 80.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="10" y="18" font-size="14">kinformer's advantage on each scenario's headline figure (log scale; right of 1x = kinformer better)</text>"#
    );
    for tick in [-4i32, -2, 0, 2, 4, 6] {
        let tx = x(2f64.powi(tick));
        let label = if tick >= 0 {
            format!("{}x", 1u32 << tick)
        } else {
            format!("1/{}x", 1u32 << -tick)
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{tx}" y1="30" x2="{tx}" y2="{y2}" stroke="{color}"/><text x="{tx}" y="{ty}" text-anchor="middle" fill="#555">{label}</text>"##,
            y2 = height - 20.0,
            color = if tick == 0 { "#000" } else { "#ddd" },
            ty = height - 6.0
        );
    }
    for (row, (scenario, other, ratio)) in bars.iter().enumerate() {
        let y = 34.0 + ROW * row as f64;
        let (from, to) = (x(1.0), x(*ratio));
        let (start, width) = if to >= from {
            (from, to - from)
        } else {
            (to, from - to)
        };
        let color = if *ratio >= 1.0 { "#2b8a3e" } else { "#c92a2a" };
        let _ = writeln!(
            svg,
            r##"<text x="{lx}" y="{ty}" text-anchor="end">{scenario} vs {other}</text><rect x="{start}" y="{y}" width="{width}" height="{h}" fill="{color}"/><text x="{vx}" y="{ty}">{value}</text>"##,
            lx = LEFT - 8.0,
            ty = y + 13.0,
            h = ROW - 6.0,
            vx = x(*ratio).max(from) + 6.0,
            value = format_ratio(*ratio),
            other = other.replace('&', "&amp;")
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_draws_one_bar_per_comparison_and_marks_losses() {
        let svg = chart_svg(&[
            ("sync-pods".into(), "client-go (JSON)".into(), 2.5),
            ("watch".into(), "kube-runtime".into(), 0.5),
        ]);
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(svg.contains("#c92a2a"), "a loss is drawn red");
        assert!(svg.contains("2.50x") && svg.contains("0.50x"));
    }
}
