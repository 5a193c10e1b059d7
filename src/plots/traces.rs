//! A heatmap trace with per-cell hover text (plotly.rs types `hovertext` as a flat list, while
//! plotly.js wants one string per cell for a heatmap).

use serde::Serialize;

#[derive(Serialize, Clone, Debug)]
pub(crate) struct CellHeatmap {
    pub r#type: &'static str,
    pub x: Vec<String>,
    pub y: Vec<String>,
    pub z: Vec<Vec<f64>>,
    #[serde(rename = "hovertext", skip_serializing_if = "Option::is_none")]
    pub hover_text: Option<Vec<Vec<String>>>,
    #[serde(rename = "hoverinfo")]
    pub hover_info: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<Vec<Vec<String>>>,
    #[serde(rename = "texttemplate", skip_serializing_if = "Option::is_none")]
    pub text_template: Option<&'static str>,
    #[serde(rename = "colorscale")]
    pub color_scale: &'static str,
    #[serde(rename = "colorbar")]
    pub color_bar: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zmin: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zmax: Option<f64>,
    #[serde(rename = "xaxis", skip_serializing_if = "Option::is_none")]
    pub x_axis: Option<String>,
    #[serde(rename = "yaxis", skip_serializing_if = "Option::is_none")]
    pub y_axis: Option<String>,
    #[serde(rename = "showscale")]
    pub show_scale: bool,
}

impl CellHeatmap {
    pub fn new(x: Vec<String>, y: Vec<String>, z: Vec<Vec<f64>>) -> Self {
        Self {
            r#type: "heatmap",
            x,
            y,
            z,
            hover_text: None,
            hover_info: "text",
            text: None,
            text_template: None,
            color_scale: "Viridis",
            color_bar: serde_json::json!({}),
            zmin: None,
            zmax: None,
            x_axis: None,
            y_axis: None,
            show_scale: true,
        }
    }
}

impl plotly::Trace for CellHeatmap {
    fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
