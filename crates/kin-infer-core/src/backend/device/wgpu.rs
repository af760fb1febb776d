//! The wgpu device (cargo feature `wgpu`; `metal` selects the same code on macOS): WGSL
//! kernels ([`super::wgsl`]) on Vulkan, Metal or DX12.
//!
//! Commands are recorded into one pending encoder and submitted when the host needs a result
//! (a read) or every [`FLUSH_EVERY`] dispatches, so a forward pass is a handful of submissions,
//! not one per op. Device errors reach the uncaptured-error handler, which records the first.

use super::{wgsl, Device, DeviceBuf, GpuBackend, GROUP};
use crate::backend::GpuDevice;
use crate::error::{InferError, Result};
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};

/// The wgpu backend.
pub type WgpuCompute = GpuBackend<WgpuDevice>;

/// Dispatches recorded before the pending encoder is submitted anyway (bounds the transient
/// parameter buffers held by one encoder).
const FLUSH_EVERY: usize = 512;

/// One adapter's device and queue.
pub struct WgpuDevice {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: GpuDevice,
    pipelines: Mutex<HashMap<&'static str, Arc<wgpu::ComputePipeline>>>,
    pending: Mutex<Pending>,
    /// The first device error, recorded by the uncaptured-error handler.
    failure: Arc<Mutex<Option<String>>>,
}

#[derive(Default)]
struct Pending {
    encoder: Option<wgpu::CommandEncoder>,
    dispatches: usize,
}

fn instance() -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
    wgpu::Instance::new(desc)
}

fn describe(a: &wgpu::Adapter) -> GpuDevice {
    let info = a.get_info();
    let limits = a.limits();
    let kind = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => "discrete GPU",
        wgpu::DeviceType::IntegratedGpu => "integrated GPU",
        wgpu::DeviceType::VirtualGpu => "virtual GPU",
        wgpu::DeviceType::Cpu => "software (CPU)",
        wgpu::DeviceType::Other => "other",
    };
    GpuDevice {
        name: info.name.clone(),
        backend: format!("wgpu/{}", info.backend.to_str()),
        kind: kind.to_string(),
        driver: format!("{} {}", info.driver, info.driver_info)
            .trim()
            .to_string(),
        software: info.device_type == wgpu::DeviceType::Cpu,
        max_buffer_bytes: limits.max_storage_buffer_binding_size,
    }
}

/// The adapters wgpu sees on this machine (Vulkan, Metal, DX12).
pub(crate) fn adapters() -> Vec<GpuDevice> {
    pollster::block_on(instance().enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .map(describe)
        .collect()
}

impl GpuBackend<WgpuDevice> {
    /// The first hardware adapter, or with `allow_software` also a software one (lavapipe,
    /// which is how CI runs the shaders); an error naming what was found when none fits.
    pub fn new(allow_software: bool) -> Result<Self> {
        let inst = instance();
        let adapters = pollster::block_on(inst.enumerate_adapters(wgpu::Backends::all()));
        let pick = adapters
            .iter()
            .filter(|a| allow_software || !describe(a).software)
            .min_by_key(|a| match a.get_info().device_type {
                wgpu::DeviceType::DiscreteGpu => 0,
                wgpu::DeviceType::IntegratedGpu => 1,
                wgpu::DeviceType::VirtualGpu => 2,
                wgpu::DeviceType::Other => 3,
                wgpu::DeviceType::Cpu => 4,
            });
        let Some(adapter) = pick else {
            let seen: Vec<String> = adapters.iter().map(|a| describe(a).name).collect();
            return Err(InferError::Unsupported(if seen.is_empty() {
                "no wgpu adapter (no Vulkan, Metal or DX12 driver found)".to_string()
            } else {
                format!(
                    "no hardware wgpu adapter (found only software ones: {}; KIN_INFER_BACKEND=wgpu uses them)",
                    seen.join(", ")
                )
            }));
        };
        let info = describe(adapter);
        // The adapter's own limits: the defaults cap a storage binding at 128 MiB, less than
        // one embedding table of a small LLM.
        let desc = wgpu::DeviceDescriptor {
            label: Some("kin-infer"),
            required_limits: adapter.limits(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| InferError::Device(format!("{}: {e}", info.name)))?;
        let failure = Arc::new(Mutex::new(None::<String>));
        let slot = failure.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut f = slot.lock().unwrap_or_else(|p| p.into_inner());
            f.get_or_insert_with(|| e.to_string());
        }));
        GpuBackend::with_device(WgpuDevice {
            device,
            queue,
            info,
            pipelines: Mutex::new(HashMap::new()),
            pending: Mutex::new(Pending::default()),
            failure,
        })
    }
}

impl WgpuDevice {
    fn failed(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn pipeline(&self, op: &'static str) -> Arc<wgpu::ComputePipeline> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .entry(op)
            .or_insert_with(|| {
                let src = wgsl::source(op).unwrap_or_else(|| panic!("no shader `{op}`"));
                let module = self
                    .device
                    .create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(op),
                        source: wgpu::ShaderSource::Wgsl(src.into()),
                    });
                Arc::new(
                    self.device
                        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                            label: Some(op),
                            layout: None,
                            module: &module,
                            entry_point: Some("main"),
                            compilation_options: Default::default(),
                            cache: None,
                        }),
                )
            })
            .clone()
    }

    /// Runs `f` on the pending encoder (in program order with every other op).
    fn record(&self, f: impl FnOnce(&mut wgpu::CommandEncoder)) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let enc = p.encoder.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default())
        });
        f(enc);
        p.dispatches += 1;
        if p.dispatches >= FLUSH_EVERY {
            let enc = p.encoder.take();
            p.dispatches = 0;
            drop(p);
            if let Some(enc) = enc {
                self.queue.submit([enc.finish()]);
            }
        }
    }

    /// Submits everything recorded.
    fn flush(&self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.dispatches = 0;
        if let Some(enc) = p.encoder.take() {
            drop(p);
            self.queue.submit([enc.finish()]);
        }
    }
}

const USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl Device for WgpuDevice {
    const NAME: &'static str = "wgpu";
    type Buf = wgpu::Buffer;

    fn info(&self) -> &GpuDevice {
        &self.info
    }

    fn buf(b: &DeviceBuf) -> &wgpu::Buffer {
        match b {
            DeviceBuf::Wgpu(b) => b,
            #[allow(unreachable_patterns)]
            _ => panic!("another backend's buffer given to wgpu"),
        }
    }

    fn wrap(b: wgpu::Buffer) -> DeviceBuf {
        DeviceBuf::Wgpu(b)
    }

    /// wgpu zero-fills new buffers.
    fn alloc(&self, words: usize) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (words.max(1) * 4) as u64,
            usage: USAGE,
            mapped_at_creation: false,
        })
    }

    fn upload(&self, words: &[u32]) -> wgpu::Buffer {
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (words.len().max(1) * 4) as u64,
            usage: USAGE,
            mapped_at_creation: true,
        });
        {
            let mut view = buf
                .get_mapped_range_mut(..)
                .expect("a buffer mapped at creation");
            // SAFETY: u32 has no padding and every byte is a valid u8; same memory. The GPU
            // reads the words in the host's order: little-endian on every platform wgpu
            // computes on.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    words.as_ptr().cast::<u8>(),
                    std::mem::size_of_val(words),
                )
            };
            view.slice(..bytes.len()).copy_from_slice(bytes);
        }
        buf.unmap();
        buf
    }

    fn launch(&self, op: &'static str, params: &[u32], bufs: &[&wgpu::Buffer], invocations: usize) {
        if invocations == 0 || self.failed().is_some() {
            return;
        }
        let pipeline = self.pipeline(op);
        let pbuf = self.upload(params);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: pbuf.as_entire_binding(),
        }];
        for (i, b) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.as_entire_binding(),
            });
        }
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(op),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let groups = invocations.div_ceil(GROUP);
        let (x, y) = if groups <= 65_535 {
            (groups, 1)
        } else {
            (65_535, groups.div_ceil(65_535))
        };
        self.record(|enc| {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(x as u32, y as u32, 1);
        });
    }

    fn download(&self, buf: &wgpu::Buffer, start: usize, len: usize, out: &mut Vec<f32>) {
        out.clear();
        if len == 0 {
            return;
        }
        if self.failed().is_some() {
            out.resize(len, f32::NAN);
            return;
        }
        let bytes = (len * 4) as u64;
        let rb = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.record(|enc| enc.copy_buffer_to_buffer(buf, (start * 4) as u64, &rb, 0, bytes));
        self.flush();
        let (tx, rx) = mpsc::channel();
        rb.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let polled = self.device.poll(wgpu::PollType::wait_indefinitely());
        let mapped = matches!(rx.recv(), Ok(Ok(()))) && polled.is_ok();
        if !mapped || self.failed().is_some() {
            if !mapped {
                let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                f.get_or_insert_with(|| "reading a result back failed (device lost?)".into());
            }
            out.resize(len, f32::NAN);
            return;
        }
        {
            let view = rb
                .slice(..)
                .get_mapped_range()
                .expect("a mapped read buffer");
            out.extend(
                view.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        }
        rb.unmap();
    }

    fn status(&self) -> Result<()> {
        match self.failed() {
            Some(e) => Err(InferError::Device(format!("{}: {e}", self.info.name))),
            None => Ok(()),
        }
    }
}
