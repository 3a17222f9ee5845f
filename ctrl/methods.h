/* methods.h - gRPC method paths of zshard's services (proto/zshard.proto). */
#ifndef ZS_METHODS_H
#define ZS_METHODS_H

#define ZS_COORD_SVC "/zshard.Coordinator/"
#define ZS_M_REGISTER ZS_COORD_SVC "RegisterServer"
#define ZS_M_HEARTBEAT ZS_COORD_SVC "Heartbeat"
#define ZS_M_ASSIGNMENTS ZS_COORD_SVC "GetAssignments"
#define ZS_M_SERVERS ZS_COORD_SVC "ListServers"
#define ZS_M_CREATE_JOB ZS_COORD_SVC "CreateJob"
#define ZS_M_GET_JOB ZS_COORD_SVC "GetJob"
#define ZS_M_JOBS ZS_COORD_SVC "ListJobs"
#define ZS_M_DELETE_JOB ZS_COORD_SVC "DeleteJob"
#define ZS_M_SET_STAGE ZS_COORD_SVC "SetStage"
#define ZS_M_REBALANCE ZS_COORD_SVC "Rebalance"
#define ZS_M_JOIN ZS_COORD_SVC "Join"
#define ZS_M_LEAVE ZS_COORD_SVC "Leave"
#define ZS_M_TRAINER_HB ZS_COORD_SVC "TrainerHeartbeat"
#define ZS_M_STOP_JOB ZS_COORD_SVC "StopJob"
#define ZS_M_CREATE_JOB_JSON ZS_COORD_SVC "CreateJobJson"
#define ZS_M_COORD_STATUS ZS_COORD_SVC "Status"
#define ZS_M_REPORT_NORM ZS_COORD_SVC "ReportNorm"
#define ZS_M_CREATE_CKPT ZS_COORD_SVC "CreateCheckpoint"
#define ZS_M_GET_CKPT ZS_COORD_SVC "GetCheckpoint"
#define ZS_M_LIST_CKPTS ZS_COORD_SVC "ListCheckpoints"
#define ZS_M_PUT_BLOB ZS_COORD_SVC "PutBlob"
#define ZS_M_RESTORE ZS_COORD_SVC "Restore"
#define ZS_M_SERVER_TASKS ZS_COORD_SVC "ServerTasks"
#define ZS_M_TASK_DONE ZS_COORD_SVC "TaskDone"
#define ZS_M_REPORT_STEP ZS_COORD_SVC "ReportStep"
#define ZS_M_STEP_REPORTS ZS_COORD_SVC "GetStepReports"
#define ZS_M_DELETE_CKPT ZS_COORD_SVC "DeleteCheckpoint"
#define ZS_M_COMM_ID ZS_COORD_SVC "CommId"

#define ZS_M_SERVER_STATUS "/zshard.Server/Status"
#define ZS_M_SERVER_SNAPSHOT "/zshard.Server/Snapshot"
#define ZS_M_SERVER_READ_CKPT "/zshard.Server/ReadCheckpoint"

#endif
