//! Schema shapes compared with the 2.0.4 fixture.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use as_tools::{FunctionTool, ToolError, ToolGroup, Toolkit};
use serde_json::Value;

fn fixture() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agentscope-2.0.4/tool-schemas.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fixture_tool(name: &str) -> Value {
    fixture().into_iter().find(|t| t["function"]["name"] == name).unwrap()
}

#[allow(dead_code)]
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WeatherArgs {
    /// The city name.
    city: String,
    /// The temperature unit, "celsius" or "fahrenheit".
    #[serde(default = "celsius")]
    #[schemars(default = "celsius")]
    unit: String,
}

fn celsius() -> String {
    "celsius".into()
}

#[allow(dead_code)]
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct StreamArgs {
    /// How many numbers to stream.
    count: i64,
}

#[test]
fn function_tool_and_reset_tools_match_fixture() {
    let weather =
        FunctionTool::new("get_weather", "Get the current weather of a city.", |a: WeatherArgs, _| async move {
            Ok::<_, ToolError>(a.city)
        });
    let stream =
        FunctionTool::new("stream_numbers", "Stream the numbers from 1 to count.", |a: StreamArgs, _| async move {
            Ok::<_, ToolError>(a.count.to_string())
        });
    let mut toolkit = Toolkit::new().with(stream);
    toolkit.add_group(ToolGroup::new("weather", "Weather tools.").tool(weather)).unwrap();
    let schemas = toolkit.schemas(&["weather".to_string()]);
    let names: Vec<&str> = schemas.iter().map(|s| s["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["reset_tools", "stream_numbers", "get_weather"]);
    for s in &schemas {
        let name = s["function"]["name"].as_str().unwrap();
        let expect = fixture_tool(name);
        assert_eq!(serde_json::to_string(s).unwrap(), serde_json::to_string(&expect).unwrap(), "{name}");
    }
}

#[test]
fn task_tools_match_fixture() {
    let toolkit = as_tools::task_tools::task_tools().into_iter().fold(Toolkit::new(), |k, t| k.with(t));
    let schemas = toolkit.schemas(&[]);
    assert_eq!(schemas.len(), 4);
    for s in &schemas {
        let name = s["function"]["name"].as_str().unwrap();
        let expect = fixture_tool(name);
        assert_eq!(serde_json::to_string_pretty(s).unwrap(), serde_json::to_string_pretty(&expect).unwrap(), "{name}");
    }
}
