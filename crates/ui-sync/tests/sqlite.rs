//! The SQLite log (`sync.md` §3.6–§3.8): appends, tails, catch-up reads and their resets,
//! audience filtering, collapsing, retention. The scenarios shared with the PostgreSQL log
//! live in `common`.

use ui_sync::{Audience, Op, ResetReason, Retention, Seq, SqliteStore, SyncStore};

mod common;

use common::{
    HOUR_MS, catch_up_rows, cursor, events, now_ms, prune_two_hours_later, read, reset_reason, row,
    rows, set,
};

#[tokio::test]
async fn appends_get_increasing_seqs_and_tail_reads_them_in_order() {
    let store = SqliteStore::open_temp().await.unwrap();
    let p = Audience::project("p1");
    assert_eq!(store.head().await.unwrap(), Seq(0));
    let first = store.append(rows(&store, &p, 3)).await.unwrap();
    let second = store.append(rows(&store, &p, 2)).await.unwrap();
    assert_eq!(first, vec![Seq(1), Seq(2), Seq(3)]);
    assert_eq!(second, vec![Seq(4), Seq(5)]);
    assert_eq!(store.append(Vec::new()).await.unwrap(), Vec::<Seq>::new());
    assert_eq!(store.head().await.unwrap(), Seq(5));

    let tailed = store.tail(Seq(1), 3).await.unwrap();
    assert_eq!(
        tailed.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![Seq(2), Seq(3), Seq(4)]
    );
    let all = store.tail(Seq(0), 100).await.unwrap();
    let expected = rows(&store, &p, 3);
    assert_eq!(all[1].row.scope, expected[1].scope);
    assert_eq!(all[1].row.key, expected[1].key);
    assert_eq!(all[1].row.audience, p);
    assert_eq!(all[1].row.op, Op::Change);
    assert!(store.tail(Seq(5), 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_new_file_is_a_new_epoch_and_reopening_keeps_epoch_salt_and_head() {
    let first = SqliteStore::open_temp().await.unwrap();
    first
        .append(rows(&first, &Audience::org("o"), 4))
        .await
        .unwrap();
    let again = SqliteStore::open(first.path()).await.unwrap();
    assert_eq!(again.meta(), first.meta());
    assert_eq!(again.head().await.unwrap(), Seq(4));
    assert_eq!(again.meta().epoch.as_str().len(), 12);

    let other = SqliteStore::open_temp().await.unwrap();
    assert_ne!(other.meta().epoch, first.meta().epoch);
    assert_ne!(other.meta().salt, first.meta().salt);
}

#[tokio::test]
async fn read_after_without_a_cursor_starts_at_the_head() {
    let store = SqliteStore::open_temp().await.unwrap();
    let p = Audience::project("p1");
    store.append(rows(&store, &p, 5)).await.unwrap();
    let answer = read(&store, None, &set(&[p])).await;
    assert_eq!(answer.cursor().seq, Seq(5));
    assert!(events(answer).is_empty());
}

#[tokio::test]
async fn every_reset_reason_answers_the_head() {
    let store = SqliteStore::open_temp().await.unwrap();
    common::every_reset_reason_answers_the_head(&store).await;
}

#[tokio::test]
async fn a_catch_up_returns_2000_visible_rows_and_resets_at_2001() {
    let store = SqliteStore::open_temp().await.unwrap();
    let p = Audience::project("p1");
    let audiences = set(std::slice::from_ref(&p));
    store
        .append(rows(&store, &p, catch_up_rows() + 1))
        .await
        .unwrap();
    let at_limit = events(read(&store, Some(&cursor(&store, 1)), &audiences).await);
    assert_eq!(at_limit.len(), catch_up_rows());
    let over = read(&store, Some(&cursor(&store, 0)), &audiences).await;
    assert_eq!(reset_reason(&over), Some(ResetReason::TooFarBehind));
    assert_eq!(over.cursor().seq, Seq(catch_up_rows() as u64 + 1));
}

#[tokio::test]
async fn too_far_behind_counts_only_visible_rows() {
    let store = SqliteStore::open_temp().await.unwrap();
    common::too_far_behind_counts_only_visible_rows_and_resets_at_2001(&store).await;
}

#[tokio::test]
async fn a_client_10000_events_behind_gets_a_reset() {
    let store = SqliteStore::open_temp().await.unwrap();
    let p = Audience::project("p1");
    store.append(rows(&store, &p, 10_000)).await.unwrap();
    let answer = read(&store, Some(&cursor(&store, 0)), &set(&[p])).await;
    assert_eq!(reset_reason(&answer), Some(ResetReason::TooFarBehind));
    assert_eq!(answer.cursor().seq, Seq(10_000));
}

#[tokio::test]
async fn user_b_never_receives_user_a_events() {
    let store = SqliteStore::open_temp().await.unwrap();
    common::user_b_never_receives_user_a_events(&store).await;
}

#[tokio::test]
async fn catch_up_collapses_by_source_scope_and_key() {
    let store = SqliteStore::open_temp().await.unwrap();
    common::catch_up_collapses_by_source_scope_and_key(&store).await;
}

#[tokio::test]
async fn prune_deletes_an_old_prefix_and_keeps_the_log_contiguous() {
    let store = SqliteStore::open_temp().await.unwrap();
    let p = Audience::project("p1");
    let now = now_ms();
    let mut old = rows(&store, &p, 10);
    for r in &mut old {
        r.at_ms = now - 2 * HOUR_MS;
    }
    store.append(old).await.unwrap();
    store.append(rows(&store, &p, 5)).await.unwrap();
    let mut late_old = vec![row(&store, "ci.runs", &p, Some("late"), None)];
    late_old[0].at_ms = now - 3 * HOUR_MS; // behind clock: after the boundary, kept
    store.append(late_old).await.unwrap();

    let retention = Retention {
        age_ms: HOUR_MS,
        rows: 100_000,
        batch: 3,
        batches: 20,
    };
    let report = store.prune(now, retention).await.unwrap();
    assert_eq!(report.deleted, 10);
    assert_eq!(report.pruned_through, Seq(10));
    assert_eq!(report.rows, 6);
    let left: Vec<u64> = store
        .tail(Seq(0), 100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq.0)
        .collect();
    assert_eq!(
        left,
        (11..=16).collect::<Vec<_>>(),
        "(pruned_through, head]"
    );
    let again = store.prune(now, retention).await.unwrap();
    assert_eq!((again.deleted, again.pruned_through), (0, Seq(10)));

    let audiences = set(&[p]);
    let expired = read(&store, Some(&cursor(&store, 9)), &audiences).await;
    assert_eq!(reset_reason(&expired), Some(ResetReason::Expired));
    assert_eq!(
        events(read(&store, Some(&cursor(&store, 10)), &audiences).await).len(),
        6
    );
}

#[tokio::test]
async fn prune_is_capped_per_run_and_the_row_cap_wins_over_young_rows() {
    let store = SqliteStore::open_temp().await.unwrap();
    store
        .append(rows(&store, &Audience::project("p1"), 50))
        .await
        .unwrap();
    let retention = Retention {
        age_ms: HOUR_MS,
        rows: 20,
        batch: 7,
        batches: 2,
    };
    let now = now_ms();
    let mut through = Vec::new();
    for _ in 0..4 {
        let report = store.prune(now, retention).await.unwrap();
        assert_eq!(
            report.rows,
            50 - report.pruned_through.0,
            "contiguous suffix"
        );
        through.push((report.deleted, report.pruned_through.0));
    }
    assert_eq!(through, vec![(14, 14), (14, 28), (2, 30), (0, 30)]);
    assert_eq!(store.tail(Seq(0), 1).await.unwrap()[0].seq, Seq(31));
}

#[tokio::test]
async fn a_writer_with_a_fast_clock_only_delays_pruning() {
    let store = SqliteStore::open_temp().await.unwrap();
    let p = Audience::project("p1");
    let now = now_ms();
    let mut written = rows(&store, &p, 10);
    for r in &mut written {
        r.at_ms = now - 2 * HOUR_MS;
    }
    written[0].at_ms = now + HOUR_MS;
    store.append(written).await.unwrap();
    let by_age = Retention {
        age_ms: HOUR_MS,
        rows: 100_000,
        batch: 100,
        batches: 20,
    };
    assert_eq!(store.prune(now, by_age).await.unwrap().deleted, 0);
    let capped = Retention { rows: 4, ..by_age };
    let report = store.prune(now, capped).await.unwrap();
    assert_eq!((report.deleted, report.pruned_through), (6, Seq(6)));
}

#[tokio::test]
async fn pruning_every_row_keeps_the_head_and_seqs_are_never_reused() {
    let store = SqliteStore::open_temp().await.unwrap();
    let p = Audience::project("p1");
    store.append(rows(&store, &p, 5)).await.unwrap();
    let report = prune_two_hours_later(&store, 100, 20).await;
    assert_eq!((report.deleted, report.rows), (5, 0));
    assert_eq!(store.head().await.unwrap(), Seq(5));
    let answer = read(
        &store,
        Some(&cursor(&store, 5)),
        &set(std::slice::from_ref(&p)),
    )
    .await;
    assert!(events(answer).is_empty());
    assert_eq!(
        store.append(rows(&store, &p, 1)).await.unwrap(),
        vec![Seq(6)]
    );
    let reopened = SqliteStore::open(store.path()).await.unwrap();
    assert_eq!(reopened.head().await.unwrap(), Seq(6));
}

#[tokio::test]
async fn changed_elsewhere_notices_commits_of_other_connections() {
    let reader = SqliteStore::open_temp().await.unwrap();
    let writer = SqliteStore::open(reader.path()).await.unwrap();
    assert!(!reader.changed_elsewhere().await.unwrap());
    writer
        .append(rows(&writer, &Audience::project("p"), 1))
        .await
        .unwrap();
    assert!(reader.changed_elsewhere().await.unwrap());
    assert!(!reader.changed_elsewhere().await.unwrap());
    assert_eq!(reader.tail(Seq(0), 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn snapshots_read_only_visible_rows_up_to_the_limit() {
    let store = SqliteStore::open_temp().await.unwrap();
    let (p, q) = (Audience::project("p"), Audience::project("q"));
    for _ in 0..3 {
        store.append(rows(&store, &p, 2)).await.unwrap();
        store.append(rows(&store, &q, 2)).await.unwrap();
    }
    let mut global = row(&store, "host.flags", &Audience::global(), None, None);
    global.at_ms = 7;
    store.append(vec![global]).await.unwrap();
    let snap = store
        .snapshot(Seq(2), &set(std::slice::from_ref(&p)), 3)
        .await
        .unwrap();
    assert_eq!(snap.head, Seq(13));
    assert_eq!(snap.epoch, store.meta().epoch);
    assert_eq!(
        snap.rows.iter().map(|r| r.seq.0).collect::<Vec<_>>(),
        vec![5, 6, 9]
    );
    let snap = store.snapshot(Seq(9), &set(&[p]), 10).await.unwrap();
    assert_eq!(
        snap.rows.iter().map(|r| r.seq.0).collect::<Vec<_>>(),
        vec![10, 13],
        "global rows are visible to everyone"
    );
}

#[tokio::test]
async fn frame_ids_are_resume_points_over_the_sqlite_log() {
    let store = SqliteStore::open_temp().await.unwrap();
    common::frame_ids_are_resume_points(&store).await;
}
