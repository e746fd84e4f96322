//! The shared tables of one OTLP profiles request (`ProfilesDictionary`)
//! and the interning that fills them.
//!
//! Every table starts with its zero value at index 0 (the proto requires
//! it: `string_table[0] == ""`, `mapping_table[0]` is "no mapping", ...),
//! so an index of 0 always means "unset".

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Arc;

use hashbrown::HashTable;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::profiles::v1development as pb;
use profiler_trace::{Frame, FrameKind, Mapping};

use super::attr;

/// A dictionary attribute value. Only the kinds we write, so that the
/// value can be a hash key (`AnyValue` holds floats and is not `Hash`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum AttrValue {
    Str(Box<str>),
    Int(i64),
    Bool(bool),
}

impl AttrValue {
    fn to_any_value(&self) -> AnyValue {
        let value = match self {
            AttrValue::Str(s) => any_value::Value::StringValue(s.to_string()),
            AttrValue::Int(i) => any_value::Value::IntValue(*i),
            AttrValue::Bool(b) => any_value::Value::BoolValue(*b),
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
    // Indices into `locations`, found by the hash of what a location
    // holds (mapping, address, frame type, lines as interned indices) and
    // compared with it: no copy of each frame is kept as a key. At 1000 Hz
    // under process churn an interval holds ~100,000 locations (each
    // process maps its files at its own addresses).
    location_index: HashTable<i32>,
    // `attr::FRAME_TYPE` attributes by frame kind.
    frame_types: HashMap<FrameKind, i32>,
    // One frame's lines, reused.
    line_buf: Vec<pb::Line>,
    // The `file+0xaddress` function of an unnamed frame by (mapping,
    // address, kind): formatted once per request, not once per trace.
    unnamed_functions: HashMap<(i32, u64, FrameKind), i32>,
    stacks: Vec<pb::Stack>,
    // Indices into `stacks`, found by the hash of their locations: at
    // 1000 Hz an interval holds megabytes of stacks, which a map keyed
    // by a copy of each would hold twice.
    stack_index: HashTable<i32>,
    hasher: RandomState,
    attributes: Vec<pb::KeyValueAndUnit>,
    attribute_index: HashMap<(i32, AttrValue), i32>,
    // The mapping kernel frames are sent under: `vmlinux`, with the
    // running kernel's build id when known (kept across `take`).
    kernel: Arc<Mapping>,
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
            location_index: HashTable::new(),
            frame_types: HashMap::new(),
            line_buf: Vec::new(),
            unnamed_functions: HashMap::new(),
            stacks: vec![pb::Stack::default()],
            stack_index: HashTable::new(),
            hasher: RandomState::new(),
            attributes: vec![pb::KeyValueAndUnit::default()],
            attribute_index: HashMap::new(),
            kernel: Arc::new(kernel_mapping(None)),
        };
        d.string_index.insert("".into(), 0);
        let empty = d.hasher.hash_one::<&[i32]>(&[]);
        d.stack_index.insert_unique(empty, 0, |_| empty);
        d
    }

    /// Empty tables whose kernel frames carry the kernel's GNU build id.
    pub(crate) fn with_kernel_build_id(build_id: Option<&str>) -> Dictionary {
        Dictionary { kernel: Arc::new(kernel_mapping(build_id)), ..Dictionary::new() }
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
    /// A frame that was not named gets one line named after where it is
    /// (`file+0xaddress`): backends drop or mark unnamed frames.
    pub(crate) fn location(&mut self, frame: &Frame) -> i32 {
        // Borrowed from the frame; only a kernel frame takes a reference
        // to the kernel's mapping (self is borrowed mutably below).
        let kernel = (frame.mapping.is_none() && frame.kind == FrameKind::Kernel).then(|| Arc::clone(&self.kernel));
        let mapping = frame.mapping.as_ref().or(kernel.as_ref());
        let mapping_index = mapping.map_or(0, |m| self.mapping(m));
        let mut lines = std::mem::take(&mut self.line_buf);
        lines.clear();
        for l in &frame.lines {
            let function_index = self.function(&l.function, l.file.as_deref());
            lines.push(pb::Line { function_index, line: i64::from(l.line), column: 0 });
        }
        if lines.is_empty() {
            let key = (mapping_index, frame.address, frame.kind);
            let function_index = match self.unnamed_functions.get(&key) {
                Some(&i) => i,
                None => {
                    let place = mapping.map_or(frame.kind.as_str(), |m| m.file_name());
                    let i = self.function(&format!("{place}+{:#x}", frame.address), None);
                    self.unnamed_functions.insert(key, i);
                    i
                }
            };
            lines.push(pb::Line { function_index, line: 0, column: 0 });
        }
        let frame_type = self.frame_type(frame.kind);
        // A guessed position (`SourceLine::approximate`) is another
        // location than the same lines known exactly.
        let approximate = frame
            .lines
            .iter()
            .any(|l| l.approximate)
            .then(|| self.attribute(attr::FRAME_APPROXIMATE, AttrValue::Bool(true)));
        let buf = [frame_type, approximate.unwrap_or(0)];
        let attributes = &buf[..1 + usize::from(approximate.is_some())];
        let hash = location_hash(&self.hasher, mapping_index, frame.address, frame_type, &lines);
        let locations = &self.locations;
        let same = |&i: &i32| {
            locations.get(i as usize).is_some_and(|l| {
                l.mapping_index == mapping_index
                    && l.address == frame.address
                    && l.attribute_indices == attributes
                    && l.lines == lines
            })
        };
        let i = match self.location_index.find(hash, same) {
            Some(&i) => i,
            None => {
                let i = table_index(self.locations.len());
                self.locations.push(pb::Location {
                    mapping_index,
                    address: frame.address,
                    lines: lines.clone(),
                    attribute_indices: attributes.to_vec(),
                });
                let (hasher, locations) = (&self.hasher, &self.locations);
                self.location_index.insert_unique(hash, i, |&j| {
                    let l = &locations[j as usize];
                    location_hash(
                        hasher,
                        l.mapping_index,
                        l.address,
                        l.attribute_indices.first().copied().unwrap_or(0),
                        &l.lines,
                    )
                });
                i
            }
        };
        self.line_buf = lines;
        i
    }

    /// Index of the `attr::FRAME_TYPE` attribute of `kind`.
    fn frame_type(&mut self, kind: FrameKind) -> i32 {
        if let Some(&i) = self.frame_types.get(&kind) {
            return i;
        }
        let i = self.attribute(attr::FRAME_TYPE, AttrValue::Str(kind.as_str().into()));
        self.frame_types.insert(kind, i);
        i
    }

    /// Index of the stack made of `locations` (leaf first).
    pub(crate) fn stack(&mut self, locations: &[i32]) -> i32 {
        let hasher = &self.hasher;
        let stacks = &self.stacks;
        let hash = hasher.hash_one(locations);
        let same = |&i: &i32| stacks.get(i as usize).is_some_and(|s| s.location_indices == locations);
        if let Some(&i) = self.stack_index.find(hash, same) {
            return i;
        }
        let i = table_index(self.stacks.len());
        self.stacks.push(pb::Stack { location_indices: locations.to_vec() });
        let stacks = &self.stacks;
        self.stack_index.insert_unique(hash, i, |&j| hasher.hash_one(&*stacks[j as usize].location_indices));
        i
    }

    /// Hands the tables over as a proto dictionary and leaves `self` empty.
    pub(crate) fn take(&mut self) -> pb::ProfilesDictionary {
        let kernel = Arc::clone(&self.kernel);
        let d = std::mem::replace(self, Dictionary { kernel, ..Dictionary::new() });
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

/// The mapping of kernel frames: the kernel image, whole.
fn kernel_mapping(build_id: Option<&str>) -> Mapping {
    Mapping {
        start: 0,
        end: u64::MAX,
        file_offset: 0,
        path: KERNEL_FILE_NAME.into(),
        file_id: None,
        gnu_build_id: build_id.map(Into::into),
        go_build_id: None,
    }
}

/// What kernel frames' mapping is called (as the reference agent and
/// perf call the kernel image).
pub(crate) const KERNEL_FILE_NAME: &str = "vmlinux";

/// The hash a location is found by: what it holds, with functions and
/// mappings as their interned indices.
fn location_hash(hasher: &RandomState, mapping_index: i32, address: u64, frame_type: i32, lines: &[pb::Line]) -> u64 {
    let mut h = hasher.build_hasher();
    (mapping_index, address, frame_type, lines.len()).hash(&mut h);
    for l in lines {
        (l.function_index, l.line).hash(&mut h);
    }
    h.finish()
}

/// Converts a table length into the next index. Tables are bounded by
/// what one reporting interval can see; more than `i32::MAX` entries would
/// be a bug upstream.
fn table_index(len: usize) -> i32 {
    i32::try_from(len).expect("OTLP dictionary table exceeds i32::MAX entries")
}
