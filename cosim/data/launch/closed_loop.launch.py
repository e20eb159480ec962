"""Launch the demo closed loop: cosim plant + PD controller (needs ROS 2 with launch_ros).

    ros2 launch launch/closed_loop.launch.py
    ros2 launch launch/closed_loop.launch.py \
        plant_params:=$PWD/launch/two_link_lock_step.yaml \
        controller_params:=$PWD/launch/pd_two_link.yaml

Both executables come from the installed ``cosim`` package (pip install -e .[ros]):
``cosim-ros`` (plant) and ``python -m ros_nodes.pd_controller`` (controller).
The controller runs on simulation time (use_sim_time) published by the plant.
"""
import os
import sys

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

HERE = os.path.dirname(os.path.abspath(__file__))


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument(
            "plant_params", default_value=os.path.join(HERE, "pendulum_lock_step.yaml"),
            description="plant parameter YAML (node name cosim_sim)"),
        DeclareLaunchArgument(
            "controller_params", default_value=os.path.join(HERE, "pd_pendulum.yaml"),
            description="PD controller parameter YAML (node name pd_controller)"),
        Node(executable="cosim-ros", name="cosim_sim", output="screen", emulate_tty=True,
             parameters=[LaunchConfiguration("plant_params")]),
        Node(executable=sys.executable, arguments=["-m", "ros_nodes.pd_controller"],
             name="pd_controller", exec_name="pd_controller", output="screen", emulate_tty=True,
             parameters=[LaunchConfiguration("controller_params"), {"use_sim_time": True}]),
    ])
