//! The shared tables of one OTLP profiles request (`ProfilesDictionary`)
//! and the interning that fills them.
//!
//! Every table starts with its zero value at index 0 (the proto requires
//! it: `string_table[0] == ""`, `mapping_table[0]` is "no mapping", ...),
//! so an index of 0 always means "unset".

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::profiles::v1development as pb;
use profiler_trace::{Frame, Mapping};

use super::attr;

/// A dictionary attribute value. Only the kinds we write, so that the
/// value can be a hash key (`AnyValue` holds floats and is not `Hash`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum AttrValue {
    Str(Box<str>),
    Int(i64),
}

impl AttrValue {
    fn to_any_value(&self) -> AnyValue {
        let value = match self {
            AttrValue::Str(s) => any_value::Value::StringValue(s.to_string()),
            AttrValue::Int(i) => any_value::Value::IntValue(*i),
        };
        AnyValue { value: Some(value) }
    }
}

/// The interned tables of one request.
pub(crate) struct Dictionary {
    strings: Vec<String>,
    string_index: HashMap<Box<str>, i32>,
    functions: Vec<pb::Function>,
    function_index: HashMap<(i32, i32), i32>,
    mappings: Vec<pb::Mapping>,
    mapping_index: HashMap<Arc<Mapping>, i32>,
    locations: Vec<pb::Location>,
    // Keyed by the whole frame (content equality), so a frame seen before
    // costs one hash lookup and nothing else.
    location_index: HashMap<Frame, i32>,
    stacks: Vec<pb::Stack>,
    stack_index: HashMap<Box<[i32]>, i32>,
    attributes: Vec<pb::KeyValueAndUnit>,
    attribute_index: HashMap<(i32, AttrValue), i32>,
}

impl Default for Dictionary {
    fn default() -> Self {
        Self::new()
    }
}

impl Dictionary {
    /// Empty tables, each holding only its zero value.
    pub(crate) fn new() -> Dictionary {
        let mut d = Dictionary {
            strings: vec![String::new()],
            string_index: HashMap::new(),
            functions: vec![pb::Function::default()],
            function_index: HashMap::new(),
            mappings: vec![pb::Mapping::default()],
            mapping_index: HashMap::new(),
            locations: vec![pb::Location::default()],
            location_index: HashMap::new(),
            stacks: vec![pb::Stack::default()],
            stack_index: HashMap::new(),
            attributes: vec![pb::KeyValueAndUnit::default()],
            attribute_index: HashMap::new(),
        };
        d.string_index.insert("".into(), 0);
        d.stack_index.insert(Box::new([]), 0);
        d
    }

    /// Index of `s` in the string table.
    pub(crate) fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.string_index.get(s) {
            return i;
        }
        let i = table_index(self.strings.len());
        self.strings.push(s.to_owned());
        self.string_index.insert(s.into(), i);
        i
    }

    /// Index of the attribute `key = value` in the attribute table.
    pub(crate) fn attribute(&mut self, key: &str, value: AttrValue) -> i32 {
        let key_strindex = self.string(key);
        let lookup = (key_strindex, value);
        if let Some(&i) = self.attribute_index.get(&lookup) {
            return i;
        }
        let i = table_index(self.attributes.len());
        self.attributes.push(pb::KeyValueAndUnit {
            key_strindex,
            value: Some(lookup.1.to_any_value()),
            unit_strindex: 0,
        });
        self.attribute_index.insert(lookup, i);
        i
    }

    fn function(&mut self, name: &str, file: Option<&str>) -> i32 {
        let name_strindex = self.string(name);
        let filename_strindex = file.map_or(0, |f| self.string(f));
        let key = (name_strindex, filename_strindex);
        if let Some(&i) = self.function_index.get(&key) {
            return i;
        }
        let i = table_index(self.functions.len());
        self.functions.push(pb::Function { name_strindex, system_name_strindex: 0, filename_strindex, start_line: 0 });
        self.function_index.insert(key, i);
        i
    }

    fn mapping(&mut self, m: &Arc<Mapping>) -> i32 {
        if let Some(&i) = self.mapping_index.get(&**m) {
            return i;
        }
        let filename_strindex = self.string(&m.path);
        let mut attribute_indices = Vec::new();
        if let Some(id) = &m.file_id {
            attribute_indices.push(self.attribute(attr::BUILD_ID_HTLHASH, AttrValue::Str(id.to_hex().into())));
        }
        if let Some(id) = &m.gnu_build_id {
            attribute_indices.push(self.attribute(attr::BUILD_ID_GNU, AttrValue::Str((**id).into())));
        }
        if let Some(id) = &m.go_build_id {
            attribute_indices.push(self.attribute(attr::BUILD_ID_GO, AttrValue::Str((**id).into())));
        }
        let i = table_index(self.mappings.len());
        self.mappings.push(pb::Mapping {
            memory_start: m.start,
            memory_limit: m.end,
            file_offset: m.file_offset,
            filename_strindex,
            attribute_indices,
        });
        self.mapping_index.insert(Arc::clone(m), i);
        i
    }

    /// Index of the location for `frame` in the location table.
    pub(crate) fn location(&mut self, frame: &Frame) -> i32 {
        if let Some(&i) = self.location_index.get(frame) {
            return i;
        }
        let mapping_index = frame.mapping.as_ref().map_or(0, |m| self.mapping(m));
        let lines = frame
            .lines
            .iter()
            .map(|l| pb::Line {
                function_index: self.function(&l.function, l.file.as_deref()),
                line: i64::from(l.line),
                column: 0,
            })
            .collect();
        let frame_type = self.attribute(attr::FRAME_TYPE, AttrValue::Str(frame.kind.as_str().into()));
        let i = table_index(self.locations.len());
        self.locations.push(pb::Location {
            mapping_index,
            address: frame.address,
            lines,
            attribute_indices: vec![frame_type],
        });
        self.location_index.insert(frame.clone(), i);
        i
    }

    /// Index of the stack made of `locations` (leaf first).
    pub(crate) fn stack(&mut self, locations: &[i32]) -> i32 {
        if let Some(&i) = self.stack_index.get(locations) {
            return i;
        }
        let i = table_index(self.stacks.len());
        self.stacks.push(pb::Stack { location_indices: locations.to_vec() });
        self.stack_index.insert(locations.into(), i);
        i
    }

    /// Hands the tables over as a proto dictionary and leaves `self` empty.
    pub(crate) fn take(&mut self) -> pb::ProfilesDictionary {
        let d = std::mem::take(self);
        pb::ProfilesDictionary {
            mapping_table: d.mappings,
            location_table: d.locations,
            function_table: d.functions,
            link_table: vec![pb::Link::default()],
            string_table: d.strings,
            attribute_table: d.attributes,
            stack_table: d.stacks,
        }
    }
}

/// Converts a table length into the next index. Tables are bounded by
/// what one reporting interval can see; more than `i32::MAX` entries would
/// be a bug upstream.
fn table_index(len: usize) -> i32 {
    i32::try_from(len).expect("OTLP dictionary table exceeds i32::MAX entries")
}
